/**
 * Result verification for meshes with untrusted peers (`--verify FRACTION`). A peer can
 * answer well-formed, finite and wrong activations (it echoed its input, it skipped layers,
 * it is a stranger's tab); nothing else the head checks would notice. So after a hop answers
 * a step, a sampled fraction of steps is checked: that hop's whole recorded history — every
 * input the head sent it, this step's included — is replayed as one prefill on another holder
 * of the range, under a throwaway session id, and the replay's last positions are compared
 * with the hop's answer within a tolerance set per runtime; on a mismatch the witness replays
 * the history once more the way the hop computed it, step by step, before the hop is blamed
 * (routing flips on mixture-of-experts ranges: STEP_REPLAY_LIMIT). The head itself is the preferred
 * witness (it is trusted, and loads the range on demand); otherwise a peer that holds the
 * range already. A disagreement throws HopMismatchError: the session classifies it `mismatch`
 * and replaces the hop and the mesh quarantines its peer, as for any other fault. A check that
 * cannot run — no other holder, the witness fails or is late — is skipped and never blamed on
 * the hop. The head's own hops are not checked.
 *
 * Cost: a checked step replays the hop's history, so checking every step (`--verify 1`)
 * grows with the square of the answer's length; a fraction f checks about f of the steps and
 * catches a peer that lies on every step within n steps with probability 1 − (1 − f)^n.
 * Answers before the first caught lie are not recalled: with f < 1 a lying peer can spoil the
 * tokens it served before it was caught (`--verify 1` leaves it none).
 */
import { f16BitsToF32 } from '../model/dtype.ts';
import type { LayerRange } from '../model/types.ts';
import type { WireWeights } from '../../shared/protocol.ts';
import type { Clock } from '../runtime/clock.ts';
import { systemClock } from '../runtime/clock.ts';
import type { Activations } from '../runtime/shard-executor.ts';
import { createRng, type Rng } from '../sampling/rng.ts';
import { HopLatency } from '../mesh/hop-latency.ts';
import { lastPositions } from './activations-slice.ts';
import type { HopHistory } from './hop-history.ts';
import { Hop, releaseLease, type HopContext } from './hop.ts';
import { HopMismatchError } from './route-errors.ts';
import { withDeadline } from '../runtime/deadline.ts';
import type { HopLease, VerifierSource } from '../mesh/route-provider.ts';

/** One answered step of one hop, as the session has it. */
export interface HopCheck {
  readonly hop: number;
  readonly peerId: string;
  readonly range: LayerRange;
  /** The hop's recorded inputs, this step's included (positions [0, history.length)). */
  readonly history: HopHistory;
  /** What the hop answered for the step: its last `answer.tokens` positions. */
  readonly answer: Activations;
}

export type VerifyResult = 'agreed' | 'mismatch' | 'skipped';

export interface HopVerifierOptions {
  /** Share of hop steps checked, in (0, 1]. */
  readonly fraction: number;
  readonly source: VerifierSource;
  /** Draws which steps are checked (default: seeded from the time). */
  readonly rng?: Rng;
  readonly clock?: Clock;
  /** A witness that has not answered within this is given up on (the check is skipped; default 30 s). */
  readonly timeoutMs?: number;
  /** Each check's outcome (metrics). */
  readonly onResult?: (result: VerifyResult, peerId: string, detail: string) => void;
  /** On a mismatch, replay the hop's own path step by step before blaming it (default true; see STEP_REPLAY_LIMIT). */
  readonly stepReplay?: boolean;
  /** Most blocks a step-by-step replay runs (default STEP_REPLAY_LIMIT); a longer path keeps the prefill replay's verdict. */
  readonly stepReplayLimit?: number;
}

/**
 * Routing flips (mixture-of-experts ranges). A router near-tie — two experts' scores closer
 * than the ~1e-7 by which a decode step and a prefill of the same history differ (other
 * kernels, other summation orders) — can pick another expert in the replay than the hop did,
 * which moves that token's output by the expert's share, O(0.1–1): far beyond any float
 * tolerance, yet honest. So a mismatch is not blamed on the prefill replay alone: the witness
 * replays the history again the way the hop computed it — its prefill block, then each decode
 * step as its own run, on one throwaway session — and the hop is blamed only if its answer
 * also differs from that. On the same runtime and format that path is the hop's own sequence
 * of kernels, so the near-tie resolves the same way; a liar (an echo, NaN, random values, a
 * skipped layer) differs from both. Cost: only on a mismatch, one run per step of the
 * session so far (at most STEP_REPLAY_LIMIT). Left open: across runtimes (a wasm tab checked
 * on the CPU head), whose step-by-step runs still differ by ~1e-6, a tie that close is still
 * blamed (an honest peer quarantined).
 */
export const STEP_REPLAY_LIMIT = 4096;

/**
 * The largest difference tolerated between a hop's answer and its replay, relative to the
 * replay's largest magnitude (at least 1): the replay runs the same weights as a prefill
 * instead of step by step, and maybe on another runtime. Measured: CPU decode against CPU
 * prefill agree to ~1e-6 on stories260k; wasm and WebGPU (SwiftShader) to ~1e-6 of CPU
 * (docs/platform.md); fp16 to ~1e-3. An answer that echoes its input is off by about 1 — these
 * leave two orders of magnitude on either side.
 */
export const TOLERANCE: Readonly<Record<string, number>> = { cpu: 1e-3, wasm: 1e-3, webgpu: 5e-3, cuda: 1e-2 };
/** Any device not in TOLERANCE. */
export const DEFAULT_TOLERANCE = 1e-2;
/** fp16 activations carry about 3 decimal digits. */
export const FP16_TOLERANCE = 3e-2;
/**
 * Quantized weights at accuracy level 4 quantize each block of activations to int8 inside
 * MatMulNBits: a value that a step-by-step run and a prefill compute 1e-7 apart can round to
 * neighbouring int8 steps (1/127 of the block's largest value), so the outputs jump by about
 * one step. Measured on stories260k, 200 greedy tokens through three honest peers, every step
 * checked: q4-b32-acc4 35 of 600 checks above 1e-3, the largest 1.5e-2; q8-b32-acc4 4 of 600,
 * the largest 8.7e-3; q4 at level 0 all within 1.8e-6. An echo is off by ~1.
 */
export const INT8_ACTIVATION_TOLERANCE = 5e-2;

/**
 * The tolerance for comparing an answer from `devices` in `dtype`, with `weights` the formats
 * of the two sides: the loosest of theirs.
 */
export function toleranceFor(devices: readonly (string | undefined)[], dtype: Activations['dtype'], weights: readonly (WireWeights | undefined)[] = []): number {
  const each = devices.map((d) => (d !== undefined && Object.hasOwn(TOLERANCE, d) ? TOLERANCE[d]! : DEFAULT_TOLERANCE));
  const int8 = weights.some((w) => w !== undefined && (w.format === 'q4' || w.format === 'q8') && w.accuracyLevel === 4);
  return Math.max(dtype === 'fp16' ? FP16_TOLERANCE : 0, int8 ? INT8_ACTIVATION_TOLERANCE : 0, ...each);
}

/** max |a − b| over max(1, max |b|): 0 when equal; Infinity when the shapes differ. Pure. */
export function activationDifference(a: Activations, b: Activations): number {
  if (a.tokens !== b.tokens || a.hiddenSize !== b.hiddenSize || a.dtype !== b.dtype) return Infinity;
  const read = a.dtype === 'fp16' ? (data: Activations['data'], i: number) => f16BitsToF32(data[i]!) : (data: Activations['data'], i: number) => data[i]!;
  let diff = 0;
  let scale = 1;
  for (let i = 0; i < a.data.length; i++) {
    const x = read(a.data, i);
    const y = read(b.data, i);
    diff = Math.max(diff, Math.abs(x - y));
    scale = Math.max(scale, Math.abs(y));
  }
  return Number.isNaN(diff) ? Infinity : diff / scale;
}

export class HopVerifier {
  private readonly rng: Rng;
  private readonly clock: Clock;

  constructor(private readonly options: HopVerifierOptions) {
    if (!(options.fraction > 0 && options.fraction <= 1)) throw new RangeError(`the verified fraction must be in (0, 1], got ${options.fraction}`);
    this.rng = options.rng ?? createRng(Math.floor(Math.random() * 2 ** 31));
    this.clock = options.clock ?? systemClock;
  }

  /**
   * Check `step` if it is drawn. Resolves with nothing to say (not drawn, agreed, skipped);
   * throws HopMismatchError when the witness disagrees, and the signal's reason when the session
   * ends meanwhile.
   */
  async check(step: HopCheck, signal: AbortSignal): Promise<void> {
    const { source } = this.options;
    if (source.trusts(step.peerId) || this.rng.next() >= this.options.fraction) return;
    const lease = await source.verifierFor(step.range, step.peerId, signal).catch(() => {
      signal.throwIfAborted();
      return undefined;
    });
    if (!lease) return this.report('skipped', step.peerId, `no other holder of layers [${step.range.start}, ${step.range.end})`);
    const sessions = [crypto.randomUUID()];
    try {
      await this.compare(lease, sessions, step, signal);
    } finally {
      void this.discard(lease, sessions);
    }
  }

  /** Replay on `lease` (each replay's session id pushed on `sessions`), report, and throw HopMismatchError on a mismatch. */
  private async compare(lease: HopLease, sessions: string[], step: HopCheck, signal: AbortSignal): Promise<void> {
    const { source } = this.options;
    let replayed: Activations;
    try {
      replayed = await this.replay(lease, sessions[0]!, step, signal);
    } catch (error) {
      signal.throwIfAborted();
      return this.report('skipped', step.peerId, `the witness ${lease.peerId} failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    const difference = activationDifference(step.answer, lastPositions(replayed, step.answer.tokens));
    const tolerance = toleranceFor([source.deviceOf(step.peerId), source.deviceOf(lease.peerId)], step.answer.dtype, [source.weightsOf(step.peerId), source.weightsOf(lease.peerId)]);
    if (difference <= tolerance) return this.report('agreed', step.peerId, `within ${difference.toExponential(1)} of ${lease.peerId}`);
    // A second witness run on the hop's own path before blaming it (STEP_REPLAY_LIMIT's note).
    const path = step.history.steps();
    let blamed = difference;
    if (this.options.stepReplay !== false && path.length > 1 && path.length <= (this.options.stepReplayLimit ?? STEP_REPLAY_LIMIT)) {
      sessions.push(crypto.randomUUID());
      let again: Activations;
      try {
        again = await this.replaySteps(lease, sessions[1]!, step, path, signal);
      } catch (error) {
        signal.throwIfAborted();
        return this.report('skipped', step.peerId, `the witness ${lease.peerId} failed the step-by-step replay: ${error instanceof Error ? error.message : String(error)}`);
      }
      const stepDifference = activationDifference(step.answer, lastPositions(again, step.answer.tokens));
      if (stepDifference <= tolerance) {
        return this.report('agreed', step.peerId, `within ${stepDifference.toExponential(1)} of ${lease.peerId}'s step-by-step replay (its prefill replay differed by ${difference.toExponential(1)}: a routing near-tie)`);
      }
      blamed = Math.min(difference, stepDifference);
    }
    const error = new HopMismatchError(step.hop, step.peerId, lease.peerId, blamed, tolerance);
    this.report('mismatch', step.peerId, error.message);
    throw error;
  }

  /** The witness's answer to the history replayed block by block, as the hop computed it, on one session: the last block's answer. */
  private async replaySteps(lease: HopLease, sessionId: string, step: HopCheck, path: ReturnType<HopHistory['steps']>, signal: AbortSignal): Promise<Activations> {
    const witness = new Hop(step.hop, { ...lease, latency: new HopLatency() }, this.witnessContext(sessionId));
    let answer!: Activations;
    for (const block of path) answer = await witness.send(block.activations, block.start, signal);
    return answer;
  }

  /** The witness's answer to the whole history as one prefill, checked like any hop's answer (a Hop of its own: its latency is not the witness's shared record). */
  private async replay(lease: HopLease, sessionId: string, step: HopCheck, signal: AbortSignal): Promise<Activations> {
    const witness = new Hop(step.hop, { ...lease, latency: new HopLatency() }, this.witnessContext(sessionId));
    return witness.send(step.history.replay(), 0, signal);
  }

  /** Free the replays' KV on the witness and end the lease (in the background). */
  private async discard(lease: HopLease, sessions: readonly string[]): Promise<void> {
    // The witness evicts them in time if a release fails; nothing else depends on it.
    for (const sessionId of sessions.slice(0, -1)) {
      await withDeadline(this.clock, 5000, () => new Error('no released within 5000 ms'), (s) => lease.link.control({ kind: 'release', sessionId }, s)).catch(() => undefined);
    }
    await releaseLease(lease, this.witnessContext(sessions.at(-1)!), 5000, []);
  }

  private witnessContext(sessionId: string): HopContext {
    return { sessionId, clock: this.clock, deadline: { fixedMs: this.options.timeoutMs ?? 30_000 } };
  }

  private report(result: VerifyResult, peerId: string, detail: string): void {
    this.options.onResult?.(result, peerId, detail);
  }
}
