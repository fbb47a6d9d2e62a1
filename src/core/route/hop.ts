/**
 * Hop: one hop of a session's route and everything the session keeps about it — the lease on
 * the peer serving its layer range, that peer's latency (its deadlines), the history of what
 * the session sent it (to rebuild it), whether the peer still holds the session's KV
 * (`stale`), and its telemetry. It sends one frame and checks the answer within the deadline
 * (`send`), rebuilds itself from its history first when stale (`run`), takes a replacement
 * lease (`replace`), and forks or releases the session's KV on its peer. Which failure means
 * what is hop-repair.ts's; the order of the hops is the session's. `--verify` replays a hop's
 * history on a witness through a Hop of its own (verify-hop.ts).
 */
import { decodeFrame, encodeFrame } from '../frames/frame-codec.ts';
import { assertFiniteActivations } from '../frames/finite-activations.ts';
import { HopLatency } from '../mesh/hop-latency.ts';
import type { HopLease } from '../mesh/route-provider.ts';
import type { LayerRange } from '../model/types.ts';
import type { Clock } from '../runtime/clock.ts';
import { withDeadline } from '../runtime/deadline.ts';
import type { Activations } from '../runtime/shard-executor.ts';
import { lastPositions } from './activations-slice.ts';
import { HopHistory } from './hop-history.ts';
import { HopDeadlineError, HopFailedError } from './route-errors.ts';
import type { HopTelemetry, SessionTelemetry } from './route-types.ts';
import { hopMark } from '../runtime/hop-trace.ts';

export interface HopContext {
  /** The session id every frame and control message of the hop carries. */
  readonly sessionId: string;
  readonly clock: Clock;
  /**
   * How long a frame may take: the hop's adaptive deadline under `ceilingMs` (`--hop-timeout`;
   * HopLatency: a multiple of its recent p99, never below `floorMs`, default DEADLINE_FLOOR_MS),
   * or a fixed time. Absent: no deadline (complete-model mode has nobody to replace a hop with).
   */
  readonly deadline?: { readonly ceilingMs: number; readonly floorMs?: number } | { readonly fixedMs: number };
  /** After every answered frame (a watcher sees each hop at work, not only each token). */
  readonly onAnswer?: () => void;
  /** True once the session is closing: no frame is sent from then on. */
  readonly closing?: () => boolean;
}

/** A deadline timer more than this late (the head's event loop stalled) gives the answer one more turn of the loop. */
const LAG_GRACE_MS = 100;

/** A session's ask to keep its KV on a peer as a prefix entry when released. */
export interface KeepPrefix {
  readonly prefixId: string;
  readonly length: number;
  /** Protocol 3.3: the entry whose first `length` positions the kept sequence shares (the peer keeps only the rest). */
  readonly parent?: { readonly prefixId: string; readonly length: number };
}

export class Hop {
  lease: HopLease;
  latency: HopLatency;
  readonly history = new HopHistory();
  /** The peer lacks this session's KV: the next `run` replays the history first. */
  stale = false;
  readonly telemetry: HopTelemetry;

  constructor(
    readonly index: number,
    lease: HopLease,
    private readonly context: HopContext,
  ) {
    this.lease = lease;
    this.latency = lease.latency ?? new HopLatency();
    this.telemetry = { peerId: lease.peerId, range: lease.range, frames: 0, tokens: 0, totalMs: 0, lastMs: 0, kvPositions: 0 };
  }

  get peerId(): string {
    return this.lease.peerId;
  }

  get range(): LayerRange {
    return this.lease.range;
  }

  /**
   * The answer to `hidden` (positions from `position`, already in the history): sent as it is,
   * or — when the hop is stale — the whole history replayed as one prefill, whose last
   * positions are the answer.
   */
  async run(hidden: Activations, position: number, signal: AbortSignal): Promise<Activations> {
    if (!this.stale) return this.send(hidden, position, signal);
    const replayed = await this.send(this.history.replay(), 0, signal);
    this.history.rebuilt();
    this.stale = false;
    return lastPositions(replayed, hidden.tokens);
  }

  /** One frame and its validated answer. A late answer is a HopDeadlineError, an unusable one a HopFailedError. */
  async send(hidden: Activations, position: number, signal: AbortSignal): Promise<Activations> {
    if (this.context.closing?.()) throw new DOMException('the session is closing', 'AbortError');
    const { lease } = this;
    const { sessionId, clock } = this.context;
    let frame: Uint8Array;
    try {
      // The request id is the link's to stamp (it pairs answers on its socket).
      frame = encodeFrame({ kind: position === 0 ? 'prefill' : 'decode', requestId: 0, sessionId, startPosition: position, range: lease.range, activations: hidden });
    } catch (error) {
      throw new Error(`the head could not encode a frame for hop ${this.index}`, { cause: error });
    }
    hopMark('head.encoded');
    const deadlineMs = this.deadlineMs(hidden.tokens);
    const started = clock.now();
    const late = () => new HopDeadlineError(this.index, lease.peerId, deadlineMs!);
    const bytes = await withDeadline(clock, deadlineMs, late, (s) => lease.link.request(frame, s), signal, LAG_GRACE_MS);
    hopMark('head.answered');
    const ms = clock.now() - started;
    const answer = this.check(bytes, hidden, position);
    hopMark('head.checked');
    this.answered(hidden.tokens, position, ms);
    return answer;
  }

  /** An answer of `tokens` positions from `position` took `ms`: latency, telemetry, watchers (a chained step reports its copies here too). */
  answered(tokens: number, position: number, ms: number): void {
    this.latency.record(tokens, ms);
    const t = this.telemetry;
    t.frames++;
    t.tokens += tokens;
    t.totalMs += ms;
    t.lastMs = ms;
    t.kvPositions = position + tokens;
    this.context.onAnswer?.();
  }

  /** Take `lease` instead (a replacement peer): it holds nothing yet, so the next `run` replays the history. */
  replace(lease: HopLease): void {
    this.lease = lease;
    this.latency = lease.latency ?? new HopLatency();
    this.stale = true;
    this.telemetry.peerId = lease.peerId;
  }

  /** Keep the history's positions [0, position) — what the peer keeps when a frame starts there (the position rule). */
  rollBack(position: number): void {
    if (this.history.length > position) this.history.truncate(position);
    this.telemetry.kvPositions = Math.min(this.telemetry.kvPositions, position);
  }

  /**
   * Start the session's KV on the peer from prefix entry `prefixId` (its first `length`
   * positions, copied). False when the peer cannot (evicted, too slow, refused): the hop then
   * prefills from 0.
   */
  async fork(prefixId: string, length: number, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
    const { sessionId, clock } = this.context;
    const message = { kind: 'fork', sessionId, prefixId, range: this.lease.range, length } as const;
    try {
      const answer = await withDeadline(clock, timeoutMs, () => new Error(`no 'forked' within ${timeoutMs} ms`), (s) => this.lease.link.control(message, s), signal);
      return answer.kind === 'forked' && answer.length === length;
    } catch {
      return false;
    }
  }

  /** How long a frame of `positions` positions may take (undefined: no deadline). */
  deadlineMs(positions: number): number | undefined {
    const deadline = this.context.deadline;
    if (deadline === undefined) return undefined;
    return 'fixedMs' in deadline ? deadline.fixedMs : Math.round(this.latency.deadlineMs(positions, deadline.ceilingMs, deadline.floorMs));
  }

  /**
   * The answer's activations, if `bytes` is the `kind` frame (a result; a chained step's copy)
   * of exactly this frame: its session, start, range (a copy), shape and finite values.
   */
  check(bytes: Uint8Array, sent: Activations, position: number, kind: 'result' | 'copy' = 'result'): Activations {
    const fail = (problem: string) => new HopFailedError(this.index, this.lease.peerId, problem);
    let answer;
    try {
      answer = decodeFrame(bytes);
    } catch (error) {
      throw fail(`answered with bytes that are no frame (${error instanceof Error ? error.message : String(error)})`);
    }
    if (answer.kind !== kind || answer.sessionId !== this.context.sessionId || answer.startPosition !== position) throw fail('answered with a frame for another request');
    if (kind === 'copy' && (answer.range.start !== this.range.start || answer.range.end !== this.range.end)) throw fail('sent a copy for another layer range');
    const got = answer.activations;
    if (got.tokens !== sent.tokens || got.hiddenSize !== sent.hiddenSize || got.dtype !== sent.dtype) throw fail('answered with activations of the wrong shape');
    try {
      assertFiniteActivations(got);
    } catch (error) {
      throw fail(error instanceof Error ? error.message : String(error));
    }
    return got;
  }
}

/**
 * Release `sessionId` on `lease` — keeping its KV as a prefix entry when asked — within
 * `timeoutMs`, record what the peer answered in `releases`, and close the lease. Resolves to
 * the prefix entries the peer kept (0 on any failure).
 */
export async function releaseLease(lease: HopLease, context: HopContext, timeoutMs: number, releases: SessionTelemetry['releases'], keepPrefix?: KeepPrefix): Promise<number> {
  const { sessionId, clock } = context;
  let kept = 0;
  try {
    const message = { kind: 'release', sessionId, ...(keepPrefix && { keepPrefix }) } as const;
    const answer = await withDeadline(clock, timeoutMs, () => new Error(`no 'released' within ${timeoutMs} ms`), (s) => lease.link.control(message, s));
    kept = answer.kind === 'released' ? (answer.keptPrefixes ?? 0) : 0;
    releases.push({ peerId: lease.peerId, freedEntries: answer.kind === 'released' ? answer.freedEntries : undefined, ...(keepPrefix && { keptPrefixes: kept }) });
  } catch (error) {
    releases.push({ peerId: lease.peerId, error: error instanceof Error ? error.message : String(error) });
  }
  await lease.link.close('session closed');
  return kept;
}
