/**
 * The ShardExecutor seam: runs one shard graph (a layer range) for one session step.
 * Implementations: onnxruntime-node (src/node) and onnxruntime-web (src/browser), both built
 * on the ORT executor in this folder with their runtime's module injected.
 */
import type { WeightSpec } from '../model/quant/weight-format.ts';
import type { Activations } from '../model/activations.ts';
import type { LayerRange } from '../model/types.ts';
import type { KvState, KvTensorOps } from './kv-state.ts';

export type { Activations } from '../model/activations.ts';

export interface ShardStep {
  readonly sessionId: string;
  /** Position of the first token in `hidden`; the KV must hold exactly this many positions. */
  readonly startPosition: number;
  readonly hidden: Activations;
}

/** The KV a step needs is not held here (evicted, restarted, replaced): rebuild and retry. */
export class CacheMissError extends Error {
  override readonly name = 'CacheMissError';
  constructor(
    readonly sessionId: string,
    readonly held: number,
    readonly needed: number,
  ) {
    super(`cache miss for session ${sessionId}: holds ${held} positions, step starts at ${needed}`);
  }
}

/** What a loaded shard is: where it runs and the weights it holds. */
export interface LoadedShard {
  /** The execution provider actually in use, e.g. 'cpu', 'webgpu', 'wasm', 'cuda'. */
  readonly device: string;
  /** The weight format its graph holds. */
  readonly weights: WeightSpec;
  /** Bytes of weights the executor holds (counted against its peer's memory budget). */
  readonly weightsBytes: number;
}

/** Several sessions' steps as one run: `run`'s rules per entry. */
export interface ShardBatchRunner<T = unknown> {
  /** Most entries one `run` takes (1: one at a time). */
  readonly max: number;
  /**
   * Run several sessions' steps (equal token counts, at most `max`) as one run, each with its
   * own KvState and start; a CacheMissError names the first entry that cannot run, before
   * anything ran.
   */
  run(steps: readonly ShardStep[], kvs: readonly KvState<T>[]): Promise<Activations[]>;
}

/**
 * What a peer (ShardPeer) needs from one loaded shard (six members; the conformance suite is
 * test/suites/shard-executor.suite.ts). The peer owns the executor and disposes it; the
 * KvState a step reads and appends to belongs to the peer's KvStore, which frees its tensors
 * through `kvOps`.
 */
export interface ShardExecutor<T = unknown> {
  readonly range: LayerRange;
  readonly loaded: LoadedShard;
  /** Tensor operations for this executor's KV tensors (for its peer's KvStore). */
  readonly kvOps: KvTensorOps<T>;
  /**
   * Run the shard over `step.hidden`, appending to `kv` from `step.startPosition` (a longer
   * `kv` is truncated there first — the peer's position rule normally did so already). When
   * `kv` holds fewer positions (or a truncation left it shorter), the step throws
   * CacheMissError. Activations of another dtype or hidden size throw RangeError.
   */
  run(step: ShardStep, kv: KvState<T>): Promise<Activations>;
  /** Batched runs across sessions. Absent: the peer runs entries one by one. */
  readonly batch?: ShardBatchRunner<T>;
  dispose(): Promise<void>;
}

/** Check an activation block's shape against its data; throws RangeError naming the mismatch. */
export function checkActivations(a: Activations, hiddenSize: number): void {
  if (a.hiddenSize !== hiddenSize) throw new RangeError(`hidden size ${a.hiddenSize} does not match the shard's ${hiddenSize}`);
  if (a.tokens < 1) throw new RangeError('an activation block needs at least one token');
  if (a.data.length !== a.tokens * a.hiddenSize) {
    throw new RangeError(`activation data holds ${a.data.length} values, expected ${a.tokens} × ${a.hiddenSize}`);
  }
}
