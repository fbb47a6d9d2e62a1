/**
 * Warm-up frames: a newly loaded range serves sessions only after it answered a warm-up — a
 * one-position prefill then a one-position decode on a session of its own, released after.
 * The prefill has the cold-start deadline (`coldMs`): the first run on a range may compile
 * kernels or, on WebGPU, shader pipelines; the decode has the ceiling (`warmMs`) and its time
 * is the range's first latency record, so every frame a session sends it has a deadline
 * (hop-latency.ts). A wrong answer (no frame, another session, the wrong shape, NaN) or a late
 * one is a `WarmUpError`: the range loader quarantines the peer, and no request paid for it.
 */
import { decodeFrame, encodeFrame } from '../frames/frame-codec.ts';
import { assertFiniteActivations } from '../frames/finite-activations.ts';
import type { Activations } from '../model/activations.ts';
import type { LayerRange } from '../model/types.ts';
import type { Clock } from '../runtime/clock.ts';
import { withDeadline } from '../runtime/deadline.ts';
import type { PeerLink } from '../runtime/peer-link.ts';
import { rangeText } from './held-range.ts';

/**
 * Default cold-start deadline of a warm-up prefill. A Node peer on CPU answers stories260k's
 * in a few ms and a 0.5B model's in well under a second; WebGPU compiles each distinct shader
 * pipeline of the shard graph on its first run — seconds on a desktop GPU, tens of seconds on
 * a slow integrated one or a phone for a large shard — so the budget is a generous minute.
 */
export const DEFAULT_WARM_UP_TIMEOUT_MS = 60_000;
/** How long the warm-up session's `release` may take (the peer evicts it anyway in time). */
const RELEASE_MS = 5000;

export class WarmUpError extends Error {
  override readonly name = 'WarmUpError';
  /** @param late the peer did not answer in time (a hang), rather than answering wrongly */
  constructor(message: string, readonly late = false) {
    super(message);
  }
}

export interface WarmUpTarget {
  readonly peerId: string;
  readonly link: PeerLink;
  readonly range: LayerRange;
  readonly hiddenSize: number;
  readonly dtype: 'fp32' | 'fp16';
}

export interface WarmUpResult {
  /** The cold prefill's time, ms. */
  readonly coldMs: number;
  /** The warm decode's time, ms: the range's first latency record. */
  readonly warmMs: number;
}

/** Send the warm-up frames to `target`; resolves with their times, rejects with WarmUpError. */
export async function warmUpRange(target: WarmUpTarget, clock: Clock, coldMs: number, warmMs: number): Promise<WarmUpResult> {
  const sessionId = globalThis.crypto.randomUUID();
  try {
    const cold = await timedFrame(target, clock, sessionId, 0, coldMs);
    const warm = await timedFrame(target, clock, sessionId, 1, warmMs);
    return { coldMs: cold, warmMs: warm };
  } finally {
    void withDeadline(clock, RELEASE_MS, () => new Error('no released'), (signal) => target.link.control({ kind: 'release', sessionId }, signal)).catch(() => {});
  }
}

async function timedFrame(target: WarmUpTarget, clock: Clock, sessionId: string, position: number, ms: number): Promise<number> {
  const { range, hiddenSize, dtype } = target;
  const what = `warm-up ${position === 0 ? 'prefill' : 'decode'} on layers ${rangeText(range)}`;
  // Small finite values: a zero vector is a degenerate input to the first norm.
  const data = dtype === 'fp32' ? Float32Array.from({ length: hiddenSize }, (_, i) => ((i % 7) - 3) / 8) : Uint16Array.from({ length: hiddenSize }, (_, i) => [0xb400, 0x3400, 0x3000, 0xb000][i % 4]!);
  const activations: Activations = { dtype, data, tokens: 1, hiddenSize };
  const frame = encodeFrame({ kind: position === 0 ? 'prefill' : 'decode', requestId: 0, sessionId, startPosition: position, range, activations });
  const started = clock.now();
  const late = () => new WarmUpError(`peer ${target.peerId} did not answer its ${what} within ${ms} ms`, true);
  let bytes: Uint8Array;
  try {
    bytes = await withDeadline(clock, ms, late, (signal) => target.link.request(frame, signal));
  } catch (error) {
    if (error instanceof WarmUpError) throw error;
    throw new WarmUpError(`peer ${target.peerId} failed its ${what}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const elapsed = clock.now() - started;
  const fail = (problem: string) => new WarmUpError(`peer ${target.peerId} answered its ${what} with ${problem}`);
  let answer;
  try {
    answer = decodeFrame(bytes);
  } catch (error) {
    throw fail(`bytes that are no frame (${error instanceof Error ? error.message : String(error)})`);
  }
  if (answer.kind !== 'result' || answer.sessionId !== sessionId || answer.startPosition !== position) throw fail('a frame for another request');
  const got = answer.activations;
  if (got.tokens !== 1 || got.hiddenSize !== hiddenSize || got.dtype !== dtype) throw fail('activations of the wrong shape');
  try {
    assertFiniteActivations(got);
  } catch (error) {
    throw fail(error instanceof Error ? error.message : String(error));
  }
  return elapsed;
}
