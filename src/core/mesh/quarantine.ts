/**
 * Quarantine: peers that hung or answered something unusable are not routed for a while.
 * Each new fault doubles the time out (bounded); a peer that stays clean for the longest time
 * out starts over. The book keeps entries by peer id, so a peer that leaves and rejoins under
 * the same id does not escape its quarantine. Times come from the injected clock.
 */
import type { Clock } from '../runtime/clock.ts';

export interface QuarantinePolicy {
  /** Time out after a first fault, ms. */
  readonly baseMs: number;
  /** No time out is longer, ms; a peer clean for this long has its strikes forgotten. */
  readonly maxMs: number;
}

export const DEFAULT_QUARANTINE: QuarantinePolicy = { baseMs: 10_000, maxMs: 300_000 };

/** A peer's quarantine as the dashboard and `/api/state` show it. */
export interface QuarantineState {
  readonly since: number; // ms on the mesh's clock
  readonly until: number;
  readonly reason: string;
  /** Faults counted towards the time out (1 for the first). */
  readonly strikes: number;
}

/** The time out of the `strikes`-th fault: baseMs × 2^(strikes − 1), at most maxMs. Pure. */
export function quarantineMs(strikes: number, policy: QuarantinePolicy): number {
  return Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, strikes - 1));
}

export class QuarantineBook {
  private readonly entries = new Map<string, QuarantineState>();
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
  add(peerId: string, reason: string): QuarantineState {
    const now = this.clock.now();
    const current = this.get(peerId);
    if (current) return current;
    const previous = this.entries.get(peerId);
    const strikes = previous && now - previous.until < this.policy.maxMs ? previous.strikes + 1 : 1;
    const entry: QuarantineState = { since: now, until: now + quarantineMs(strikes, this.policy), reason, strikes };
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
