/**
 * ShardExecutor on onnxruntime (either runtime, injected). Two ways to keep the KV (see
 * KvState), picked per executor:
 *
 * - **pool** (CPU and wasm tensors): each session's KV sits in preallocated
 *   [1, kvHeads, capacity, headDim] buffers, fed whole as the past (onnxruntime-node binds a
 *   CPU input's typed array without copying; onnxruntime-web copies inputs into the wasm
 *   heap on every run). Only `hidden_states_out` and the new positions' K/V (`new.*`) are
 *   fetched, and written into the buffers here: no fetched output grows with the context.
 *   (Fetching `present.*` would be copied back whole by the JS API on every step, even into
 *   a preallocated output: measured in the note of issue 17.)
 * - **replace** (KV on the GPU): `present.*` stays in GPU buffers (`preferredOutputLocation`)
 *   and becomes the next step's past; the JS API never reads it. Sliding-window layers are fed
 *   only the positions they hold; when those pass their bound (KvState.windowTrim) a small
 *   second session (kv-trim-graph.ts, two Slice nodes, outputs on the GPU too) copies the last
 *   window's positions into new tensors, so their memory stops growing as in the pool.
 *
 * `runBatch` runs several sessions' steps as one onnxruntime run (batch > 1, each entry at
 * its own length): the weights are read once for all of them.
 */
import type * as Ort from 'onnxruntime-common';
import {
  newKeyName,
  newValueName,
  pastKeyName,
  pastValueName,
  presentKeyName,
  presentValueName,
  SHARD_INPUT_HIDDEN,
  SHARD_INPUT_POSITION_IDS,
  SHARD_INPUT_PRESENT_HELD,
  SHARD_INPUT_SEQLENS_K,
  SHARD_INPUT_TOTAL_LENGTH,
  SHARD_INPUT_SEQLENS_K_WINDOW,
  SHARD_INPUT_TOTAL_LENGTH_WINDOW,
  SHARD_OUTPUT_HIDDEN,
  sequenceInputs,
} from '../model/shard-graph.ts';
import type { ActivationDtype } from '../model/activations.ts';
import { buildKvTrimGraph, KV_TRIM_END, KV_TRIM_KEPT_KEY, KV_TRIM_KEPT_VALUE, KV_TRIM_KEY, KV_TRIM_START, KV_TRIM_VALUE } from '../model/kv-trim-graph.ts';
import type { WeightSpec } from '../model/quant/weight-format.ts';
import type { KvWindow } from '../model/layer-attention.ts';
import type { LayerRange, ModelConfig } from '../model/types.ts';
import type { KvState, KvTensorOps, LayerKv } from './kv-state.ts';
import type { OrtModule } from './ort-session.ts';
import type { RunQueue } from './run-queue.ts';
import { BatchStaging } from './batch-staging.ts';
import { CacheMissError, checkActivations, type Activations, type LoadedShard, type ShardBatchRunner, type ShardExecutor, type ShardStep } from './shard-executor.ts';

type Tensor = Ort.Tensor;
type FloatArray = Float32Array | Uint16Array;

/** How an executor keeps KV: in place in pooled buffers, or replaced by each step's present tensors. */
export type KvMode = 'pool' | 'replace';

/**
 * Most positions one pooled onnxruntime run takes; a longer step (a prefill) runs as
 * consecutive runs of at most this many, each appending to the KV the one before wrote. The
 * CPU arena keeps the largest run's activations for the session's life, so this caps a
 * peer's resident growth (a 512-position prefill of 15 SmolLM2-shaped q4 layers: peak
 * growth 154 → 130 MiB at 128, same prefill CPU time; bench/peer-memory.ts, issue 24's note).
 */
export const MAX_RUN_POSITIONS = 128;

import { ortKvOps } from './ort-kv-ops.ts';
import { hopMark } from './hop-trace.ts';
export { ortKvOps, type KvShape } from './ort-kv-ops.ts';

/**
 * Write the first `count` new positions of entry `b` of a run's K or V, [B, rows, kvHeads*headDim]
 * row-major, into its pooled buffer [1, kvHeads, capacity, headDim] at positions start .. start+count-1.
 */
function writeNew(into: FloatArray, capacity: number, fresh: FloatArray, b: number, rows: number, count: number, start: number, heads: number, headDim: number): void {
  const row = heads * headDim;
  for (let i = 0; i < count; i++) {
    const src = (b * rows + i) * row;
    for (let h = 0; h < heads; h++) {
      const at = (h * capacity + start + i) * headDim;
      into.set(fresh.subarray(src + h * headDim, src + (h + 1) * headDim), at);
    }
  }
}

export class OrtShardExecutor implements ShardExecutor<Tensor> {
  readonly kvOps: KvTensorOps<Tensor>;
  readonly loaded: LoadedShard;
  readonly batch: ShardBatchRunner<Tensor>;
  readonly kvMode: KvMode;
  private readonly tensorType: 'float32' | 'float16';
  private readonly poolFetches: string[] = [SHARD_OUTPUT_HIDDEN];
  private readonly replaceFetches: string[] = [SHARD_OUTPUT_HIDDEN];
  private readonly staging: BatchStaging;
  /** The graph's layers attend in place (it takes `present_held`): a batch may mix entries of different lengths. */
  private readonly takesPresentHeld: boolean;
  /** The KV trim session (replace mode with windowed layers), created on first use. */
  private trimSession?: Promise<Ort.InferenceSession>;

  constructor(
    private readonly ort: OrtModule,
    private readonly session: Ort.InferenceSession,
    private readonly config: Pick<ModelConfig, 'hiddenSize' | 'numKvHeads' | 'headDim'>,
    readonly range: LayerRange,
    readonly dtype: ActivationDtype,
    readonly device: string,
    readonly weights: WeightSpec,
    readonly weightsBytes = 0,
    /** Runs go through it one at a time when given (onnxruntime-web). */
    private readonly queue?: RunQueue,
    /** Default: 'replace' when the KV lives on the GPU (WebGPU), else 'pool'. */
    kvMode?: KvMode,
    /** Most positions one pooled run takes (see MAX_RUN_POSITIONS). */
    private readonly maxRunPositions = MAX_RUN_POSITIONS,
    /** The part's sliding-window layers (its manifest's `window`): the graph takes `seqlens_k_window`. */
    private readonly window?: KvWindow,
  ) {
    this.kvOps = ortKvOps(ort, config, dtype, window);
    this.loaded = { device, weights, weightsBytes };
    const executor = this;
    this.batch = {
      get max() {
        return executor.maxBatch;
      },
      run: (steps, kvs) => this.runBatch(steps, kvs),
    };
    this.tensorType = dtype === 'fp16' ? 'float16' : 'float32';
    this.kvMode = kvMode ?? (device === 'webgpu' ? 'replace' : 'pool');
    for (let l = range.start; l < range.end; l++) {
      this.poolFetches.push(newKeyName(l), newValueName(l));
      this.replaceFetches.push(presentKeyName(l), presentValueName(l));
    }
    this.staging = new BatchStaging(ort, config.numKvHeads, config.headDim, dtype);
    this.takesPresentHeld = session.inputNames.includes(SHARD_INPUT_PRESENT_HELD);
  }

  /** Whether one batched run may mix entries of different lengths (several positions beside single ones): in-place graphs. */
  get mixesLengths(): boolean {
    return this.takesPresentHeld && this.kvMode === 'pool';
  }

  /** Most entries one `runBatch` takes (the pool keeps batching in memory); the replace mode runs one. */
  get maxBatch(): number {
    return this.kvMode === 'pool' ? 16 : 1;
  }

  async run(step: ShardStep, kv: KvState<Tensor>): Promise<Activations> {
    hopMark('peer.run.start');
    const [out] = await this.runBatch([step], [kv]);
    hopMark('peer.run.end');
    return out;
  }

  /**
   * Run several sessions' steps as one onnxruntime run. Every step must carry the same token
   * count, unless the graph attends in place (`mixesLengths`: shorter entries are padded to
   * the longest, at most `maxRunPositions`); each KvState follows its own step (truncated to its start if it holds more; a
   * state holding fewer positions than its start rejects the whole call with CacheMissError
   * before anything runs, so the caller takes that entry out and retries the rest).
   */
  async runBatch(steps: readonly ShardStep[], kvs: readonly KvState<Tensor>[]): Promise<Activations[]> {
    if (steps.length === 0 || steps.length !== kvs.length) throw new RangeError(`a batch needs one KV state per step (${steps.length} steps, ${kvs.length} states)`);
    const tokens = Math.max(...steps.map((s) => s.hidden.tokens));
    const ragged = steps.some((s) => s.hidden.tokens !== tokens);
    for (let b = 0; b < steps.length; b++) {
      const step = steps[b];
      checkActivations(step.hidden, this.config.hiddenSize);
      if (step.hidden.dtype !== this.dtype) throw new RangeError(`activations are ${step.hidden.dtype}, the shard runs ${this.dtype}`);
      if (ragged && !this.mixesLengths) throw new RangeError(`a batch's steps carry one token count (${steps[0].hidden.tokens} and ${step.hidden.tokens})`);
      if (kvs[b].length < step.startPosition) throw new CacheMissError(step.sessionId, kvs[b].length, step.startPosition);
    }
    if (steps.length > 1 && this.kvMode !== 'pool') throw new RangeError(`this executor (KV ${this.kvMode}) runs one step at a time`);
    if (steps.length > 1 && tokens > 1 && !this.mixesLengths) throw new RangeError(`steps of ${tokens} positions run one at a time (GroupQueryAttention takes batch 1 with several positions and past context)`);
    if (steps.length > 1 && tokens > this.maxRunPositions) throw new RangeError(`a batched step carries at most ${this.maxRunPositions} positions (${tokens})`);
    for (let b = 0; b < steps.length; b++) kvs[b].truncate(steps[b].startPosition);
    // The peer's position rule trimmed already; a state that still disagrees must not run as
    // if it held the positions before (a KvState that could not trim where it lives).
    for (let b = 0; b < steps.length; b++) if (kvs[b].length !== steps[b].startPosition) throw new CacheMissError(steps[b].sessionId, kvs[b].length, steps[b].startPosition);
    // A long step reserves chunk by chunk (runInChunks): windowed layers then never hold a whole prompt.
    const pooled = this.kvMode === 'pool' && kvs.every((kv, b) => kv.reserve(steps[b].startPosition + Math.min(steps[b].hidden.tokens, this.maxRunPositions)));
    if (!pooled) return this.runReplacing(steps[0], kvs[0]);
    return tokens > this.maxRunPositions ? [await this.runInChunks(steps[0], kvs[0])] : this.runPooled(steps, kvs, tokens);
  }

  /** One long step (batch 1, pooled KV) as consecutive runs of at most `maxRunPositions`. */
  private async runInChunks(step: ShardStep, kv: KvState<Tensor>): Promise<Activations> {
    const { hiddenSize } = this.config;
    const { tokens, data } = step.hidden;
    const out = this.dtype === 'fp16' ? new Uint16Array(tokens * hiddenSize) : new Float32Array(tokens * hiddenSize);
    for (let at = 0; at < tokens; at += this.maxRunPositions) {
      const n = Math.min(this.maxRunPositions, tokens - at);
      const hidden: Activations = { dtype: this.dtype, data: data.subarray(at * hiddenSize, (at + n) * hiddenSize), tokens: n, hiddenSize };
      // Released while an earlier run was in flight: no KV left to continue from.
      if (kv.isDisposed) throw new CacheMissError(step.sessionId, at, step.startPosition + at);
      if (!kv.reserve(step.startPosition + at + n)) throw new Error('pooled KV could not grow');
      const [part] = await this.runPooled([{ sessionId: step.sessionId, startPosition: step.startPosition + at, hidden }], [kv], n);
      out.set(part.data, at * hiddenSize);
    }
    return { dtype: this.dtype, data: out, tokens, hiddenSize };
  }

  /** `tokens`: the run's rows per entry, the longest entry's positions (shorter entries are padded: in-place graphs only). */
  private async runPooled(steps: readonly ShardStep[], kvs: readonly KvState<Tensor>[], tokens: number): Promise<Activations[]> {
    const { hiddenSize, numKvHeads, headDim } = this.config;
    const batch = steps.length;
    const fed = steps.map((s) => s.hidden.tokens);
    const hidden = batch === 1 ? steps[0].hidden.data : this.concat(steps.map((s) => s.hidden.data), tokens * hiddenSize);
    const feeds: Record<string, Tensor> = {
      [SHARD_INPUT_HIDDEN]: new this.ort.Tensor(this.tensorType, hidden as Float32Array, [batch, tokens, hiddenSize]),
      ...this.sequenceFeeds(steps.map((s) => s.startPosition), tokens, fed),
      ...this.windowFeeds(kvs.map((kv) => kv.windowLength), tokens),
      ...this.presentHeldFeed(0),
    };
    const staged = batch === 1 ? undefined : this.staging.begin();
    for (let layer = this.range.start; layer < this.range.end; layer++) {
      const starts = kvs.map((kv, b) => steps[b].startPosition - kv.offsetOf(layer));
      if (!staged) {
        const past = kvs[0].past(layer)!;
        feeds[pastKeyName(layer)] = past.key;
        feeds[pastValueName(layer)] = past.value;
      } else {
        // One [B, kvHeads, longest past, headDim] tensor per layer: a copy of each entry's valid positions.
        const pasts = kvs.map((kv) => kv.past(layer)!);
        feeds[pastKeyName(layer)] = staged.stage(pasts.map((p) => p.key), starts);
        feeds[pastValueName(layer)] = staged.stage(pasts.map((p) => p.value), starts);
      }
    }
    let results: Ort.InferenceSession.ReturnType;
    try {
      results = await this.runSession(feeds, this.poolFetches);
    } finally {
      staged?.done();
    }
    // A session released while the run was in flight (its client went away) has no buffers
    // left to write: its output is still returned, nothing is written for it.
    const live = kvs.map((kv) => !kv.isDisposed);
    for (let layer = this.range.start; layer < this.range.end; layer++) {
      const freshKey = results[newKeyName(layer)].data as FloatArray;
      const freshValue = results[newValueName(layer)].data as FloatArray;
      for (let b = 0; b < batch; b++) {
        if (!live[b]) continue;
        const past = kvs[b].past(layer)!;
        const capacity = kvs[b].capacityOf(layer);
        const at = steps[b].startPosition - kvs[b].offsetOf(layer);
        writeNew(past.key.data as FloatArray, capacity, freshKey, b, tokens, fed[b], at, numKvHeads, headDim);
        writeNew(past.value.data as FloatArray, capacity, freshValue, b, tokens, fed[b], at, numKvHeads, headDim);
      }
    }
    for (let b = 0; b < batch; b++) if (live[b]) kvs[b].commit(steps[b].startPosition + fed[b]);
    const out = results[SHARD_OUTPUT_HIDDEN].data as FloatArray;
    const per = tokens * hiddenSize;
    return steps.map((_, b) => ({ dtype: this.dtype, data: batch === 1 ? out : out.slice(b * per, b * per + fed[b] * hiddenSize), tokens: fed[b], hiddenSize }));
  }

  private async runReplacing(step: ShardStep, kv: KvState<Tensor>): Promise<Activations[]> {
    const { hiddenSize } = this.config;
    const feeds: Record<string, Tensor> = {
      [SHARD_INPUT_HIDDEN]: new this.ort.Tensor(this.tensorType, step.hidden.data as Float32Array, [1, step.hidden.tokens, hiddenSize]),
      ...this.sequenceFeeds([step.startPosition], step.hidden.tokens),
      ...this.windowFeeds([kv.windowLength], step.hidden.tokens),
      ...this.presentHeldFeed(step.startPosition),
    };
    for (let layer = this.range.start; layer < this.range.end; layer++) {
      const past = kv.past(layer) ?? this.emptyPast();
      feeds[pastKeyName(layer)] = past.key;
      feeds[pastValueName(layer)] = past.value;
    }
    const results = await this.runSession(feeds, this.replaceFetches);
    const present = new Map<number, LayerKv<Tensor>>();
    for (let layer = this.range.start; layer < this.range.end; layer++) {
      present.set(layer, { key: results[presentKeyName(layer)], value: results[presentValueName(layer)] });
    }
    const total = step.startPosition + step.hidden.tokens;
    if (kv.isDisposed) {
      // Released while the run was in flight: nothing keeps these tensors.
      for (const p of present.values()) (this.kvOps.dispose(p.key), this.kvOps.dispose(p.value));
    } else {
      try {
        kv.append(present, total);
      } catch (error) {
        for (const p of present.values()) (this.kvOps.dispose(p.key), this.kvOps.dispose(p.value));
        throw new Error(`shard returned unusable KV: ${error instanceof Error ? error.message : String(error)}`);
      }
      await this.trimWindow(kv);
    }
    const out = results[SHARD_OUTPUT_HIDDEN];
    return [{ dtype: this.dtype, data: out.data as FloatArray, tokens: step.hidden.tokens, hiddenSize }];
  }

  /** Past positions the in-place layers' present outputs keep: the past where present is fetched (replace), 0 in a pooled run (nothing copied). */
  private presentHeldFeed(held: number): Record<string, Tensor> {
    return this.takesPresentHeld ? { [SHARD_INPUT_PRESENT_HELD]: new this.ort.Tensor('int64', BigInt64Array.of(BigInt(held)), [1]) } : {};
  }

  /**
   * Replace mode: when the windowed layers hold more than their bound, keep only their last
   * window's positions, copied by the trim session where the KV lives (GPU outputs on WebGPU).
   */
  private async trimWindow(kv: KvState<Tensor>): Promise<void> {
    const trim = kv.windowTrim();
    if (trim === undefined) return;
    const session = await (this.trimSession ??= this.ort.InferenceSession.create(buildKvTrimGraph(this.dtype), {
      executionProviders: [this.device],
      logSeverityLevel: 3,
      ...(this.device === 'webgpu' ? { preferredOutputLocation: { [KV_TRIM_KEPT_KEY]: 'gpu-buffer', [KV_TRIM_KEPT_VALUE]: 'gpu-buffer' } } : {}),
    }));
    const start = new this.ort.Tensor('int64', BigInt64Array.of(BigInt(trim.start)), [1]);
    const end = new this.ort.Tensor('int64', BigInt64Array.of(BigInt(trim.end)), [1]);
    const trimmed = new Map<number, LayerKv<Tensor>>();
    try {
      for (const layer of kv.windowedLayers) {
        const past = kv.past(layer);
        if (past === undefined || kv.isDisposed) throw new Error('released while trimming');
        const feeds = { [KV_TRIM_KEY]: past.key, [KV_TRIM_VALUE]: past.value, [KV_TRIM_START]: start, [KV_TRIM_END]: end };
        const run = () => session.run(feeds, [KV_TRIM_KEPT_KEY, KV_TRIM_KEPT_VALUE]);
        const out = await (this.queue ? this.queue.run(run) : run());
        trimmed.set(layer, { key: out[KV_TRIM_KEPT_KEY], value: out[KV_TRIM_KEPT_VALUE] });
      }
      kv.compactWindow(trimmed, trim.from);
    } catch (error) {
      for (const p of trimmed.values()) (this.kvOps.dispose(p.key), this.kvOps.dispose(p.value));
      if (kv.isDisposed) return; // released meanwhile: nothing to keep
      throw error;
    }
  }

  /** The windowed layers' seqlens_k and total length, from the positions they hold (graphs with windowed layers only). */
  private windowFeeds(held: readonly number[], tokens: number): Record<string, Tensor> {
    if (!this.window) return {};
    const { seqlensK, total } = sequenceInputs(held, tokens);
    return {
      [SHARD_INPUT_SEQLENS_K_WINDOW]: new this.ort.Tensor('int32', seqlensK, [held.length]),
      [SHARD_INPUT_TOTAL_LENGTH_WINDOW]: new this.ort.Tensor('int32', total, []),
    };
  }

  /** seqlens_k, total_sequence_length and position_ids for entries starting at `starts`, `tokens` each. */
  private sequenceFeeds(starts: readonly number[], tokens: number, fed?: readonly number[]): Record<string, Tensor> {
    const { seqlensK, total, positionIds } = sequenceInputs(starts, tokens, fed);
    return {
      [SHARD_INPUT_SEQLENS_K]: new this.ort.Tensor('int32', seqlensK, [starts.length]),
      [SHARD_INPUT_TOTAL_LENGTH]: new this.ort.Tensor('int32', total, []),
      [SHARD_INPUT_POSITION_IDS]: new this.ort.Tensor('int64', positionIds, [starts.length, tokens]),
    };
  }

  private runSession(feeds: Record<string, Tensor>, fetches: string[]): Promise<Ort.InferenceSession.ReturnType> {
    const run = () => this.session.run(feeds, fetches);
    return this.queue ? this.queue.run(run) : run();
  }

  /** The entries one after the other, each padded with zeros to `each` values. */
  private concat(parts: readonly FloatArray[], each: number): FloatArray {
    const out = this.dtype === 'fp16' ? new Uint16Array(parts.length * each) : new Float32Array(parts.length * each);
    parts.forEach((p, b) => out.set(p, b * each));
    return out;
  }

  /**
   * The past of a first step: none. An in-place graph gets room for one position holding none
   * (it reads each entry's past length from its position ids): onnxruntime 1.30's WebGPU
   * provider crashes the process on its MatMul / Where over zero positions.
   */
  private emptyPast(): LayerKv<Tensor> {
    const { numKvHeads, headDim } = this.config;
    const room = this.takesPresentHeld ? 1 : 0;
    const empty = () =>
      new this.ort.Tensor(this.tensorType, (this.dtype === 'fp16' ? new Uint16Array(room * numKvHeads * headDim) : new Float32Array(room * numKvHeads * headDim)) as Float32Array, [1, numKvHeads, room, headDim]);
    return { key: empty(), value: empty() };
  }

  async dispose(): Promise<void> {
    const trim = this.trimSession;
    this.trimSession = undefined;
    if (trim) await (await trim.catch(() => undefined))?.release();
    await this.session.release();
  }
}
