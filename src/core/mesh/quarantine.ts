/**
 * Quarantine: peers that hung or answered something unusable are not routed for a while.
 * Faults come in two classes, counted apart: a *hang* (no answer in time: a paused, swapping or
 * overloaded process, which answers rightly once it resumes) and a *wrong* answer (bytes that
 * are no frame, wrong shape, NaN, a mismatch under `--verify`: a broken or lying peer). Each new
 * fault of a class doubles that class's time out up to its cap; a peer clean for the cap has
 * that class's strikes forgotten. Hangs stop at `hangMaxMs` (30 s by default), so an honest peer
 * paused many times is back within half a minute each time, while wrong answers back off to
 * `maxMs` (5 min) and are remembered that long. The book keeps entries by peer id, so a peer
 * that leaves and rejoins under the same id does not escape its quarantine. Times come from the
 * injected clock.
 */
import type { Clock } from '../runtime/clock.ts';

export interface QuarantinePolicy {
  /** Time out after a first fault, ms. */
  readonly baseMs: number;
  /** No time out for wrong answers is longer, ms; a peer clean for this long has its wrong-answer strikes forgotten. */
  readonly maxMs: number;
  /** The same for hangs (default: 30 s, or maxMs if that is shorter). */
  readonly hangMaxMs?: number;
}

export const DEFAULT_HANG_MAX_MS = 30_000;
export const DEFAULT_QUARANTINE: QuarantinePolicy = { baseMs: 10_000, maxMs: 300_000, hangMaxMs: DEFAULT_HANG_MAX_MS };

/** What a fault says of its peer: it did not answer in time, or it answered wrongly. */
export type FaultClass = 'hang' | 'wrong';

/** The cap (and clean period) of a fault class under `policy`. Pure. */
export function classMaxMs(fault: FaultClass, policy: QuarantinePolicy): number {
  if (fault === 'wrong') return policy.maxMs;
  return Math.max(policy.baseMs, Math.min(policy.maxMs, policy.hangMaxMs ?? DEFAULT_HANG_MAX_MS));
}

/** A peer's quarantine as the dashboard and `/api/state` show it. */
export interface QuarantineState {
  readonly since: number; // ms on the mesh's clock
  readonly until: number;
  readonly reason: string;
  /** Faults of its class counted towards the time out (1 for the first). */
  readonly strikes: number;
}

/** A class's recent faults: how many, and when the last quarantine they caused ended. */
interface Record {
  readonly strikes: number;
  readonly until: number;
}

/** The time out of the `strikes`-th fault of a class: baseMs × 2^(strikes − 1), at most the class's cap. Pure. */
export function quarantineMs(strikes: number, policy: QuarantinePolicy, fault: FaultClass = 'wrong'): number {
  return Math.min(classMaxMs(fault, policy), policy.baseMs * 2 ** Math.max(0, strikes - 1));
}

export class QuarantineBook {
  private readonly entries = new Map<string, QuarantineState>();
  private readonly records = new Map<string, Record>(); // by `${fault} ${peerId}`
  private readonly timers = new Map<string, () => void>();

  constructor(
    private readonly clock: Clock,
    private readonly policy: QuarantinePolicy,
    /** Called when a quarantine begins or ends. */
    private readonly changed: (peerId: string) => void,
  ) {}

  /** The peer's quarantine, if it is in one now. */
  get(peerId: string): QuarantineState | undefined {
    const entry = this.entries.get(peerId);
    return entry && this.clock.now() < entry.until ? entry : undefined;
  }

  /**
   * Quarantine `peerId` for `reason`. A peer already in quarantine stays in the one it has
   * (sessions that all saw the same fault count it once). Returns the quarantine.
   */
  add(peerId: string, reason: string, fault: FaultClass = 'wrong'): QuarantineState {
    const now = this.clock.now();
    const current = this.get(peerId);
    if (current) return current;
    const key = `${fault} ${peerId}`;
    const previous = this.records.get(key);
    const strikes = previous && now - previous.until < classMaxMs(fault, this.policy) ? previous.strikes + 1 : 1;
    const entry: QuarantineState = { since: now, until: now + quarantineMs(strikes, this.policy, fault), reason, strikes };
    this.records.set(key, { strikes, until: entry.until });
    this.entries.set(peerId, entry);
    this.schedule(peerId, entry);
    this.changed(peerId);
    return entry;
  }

  /** Tell `changed` when the quarantine is over (again later if a timer fires a little early). */
  private schedule(peerId: string, entry: QuarantineState): void {
    this.timers.get(peerId)?.();
    this.timers.set(
      peerId,
      this.clock.setTimeout(() => {
        this.timers.delete(peerId);
        if (this.entries.get(peerId) !== entry) return;
        if (this.clock.now() < entry.until) return this.schedule(peerId, entry);
        this.changed(peerId);
      }, entry.until - this.clock.now()),
    );
  }
}
