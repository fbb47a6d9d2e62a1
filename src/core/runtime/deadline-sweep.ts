/**
 * DeadlineSweep: many deadlines on one clock, one timer. A deadline is a number (its due time
 * on the clock) and what to do when it passes; adding one is a Set insert, removing it (the
 * answer came) a Set delete: no timer is made or cleared per frame (withDeadline made and
 * cleared one for every frame to every hop, SocketLink another).
 *
 * The timer is armed for the earliest due time added; a deadline removed before it leaves the
 * timer in place: it fires, finds nothing due, and is armed again for the earliest deadline
 * still there — or not at all when none is, so an idle sweep ends with at most that one timer,
 * which holds no deadline (and host timers never keep a process alive: the Clock contract).
 * Deadlines that are due fire in the order of their due times (as separate timers would), each
 * once, and only after their time on the clock: a timer the host fires a little early re-arms
 * for the rest.
 *
 * A deadline with `graceMs` whose sweep ran more than that late (the event loop was stalled)
 * waits one more millisecond instead, once (withDeadline's lag grace).
 */
import type { Clock } from './clock.ts';

export interface SweptDeadline {
  /** When it passes, on the sweep's clock (ms). */
  due: number;
  /** A sweep more than this late moves `due` 1 ms on instead of expiring, once (0: never). */
  graceMs: number;
  expire(): void;
}

/** The longest delay a host timer takes as given (2^31 − 1 ms). */
export const MAX_TIMER_MS = 0x7fffffff;

export class DeadlineSweep {
  private readonly deadlines = new Set<SweptDeadline>();
  /** The due time the timer is armed for (Infinity: no timer). */
  private armedFor = Infinity;
  private cancel: (() => void) | undefined;

  constructor(private readonly clock: Clock) {}

  /** Deadlines waiting (not yet expired or removed). */
  get size(): number {
    return this.deadlines.size;
  }

  /** Whether its timer is armed (it may hold no deadline: see the header). */
  get armed(): boolean {
    return this.cancel !== undefined;
  }

  add(deadline: SweptDeadline): void {
    this.deadlines.add(deadline);
    if (deadline.due < this.armedFor) this.arm(deadline.due);
  }

  /** It will not expire (it settled first); a no-op once it has. */
  delete(deadline: SweptDeadline): void {
    this.deadlines.delete(deadline);
  }

  /** Cancel its timer (its owner closed; deadlines still added arm it again). */
  stop(): void {
    this.cancel?.();
    this.cancel = undefined;
    this.armedFor = Infinity;
  }

  private arm(due: number): void {
    this.cancel?.();
    this.armedFor = due;
    // At most the host's timer range (2^31 − 1 ms, about 24.8 days): a longer delay fires at once on
    // Node (and re-arming would spin); a deadline farther out is armed for again when that timer finds it not due.
    this.cancel = this.clock.setTimeout(this.sweep, Math.min(MAX_TIMER_MS, Math.max(0, due - this.clock.now())));
  }

  private readonly sweep = (): void => {
    this.cancel = undefined;
    this.armedFor = Infinity;
    const now = this.clock.now();
    let expired: SweptDeadline[] | undefined;
    let next = Infinity;
    for (const d of this.deadlines) {
      if (d.due > now) {
        if (d.due < next) next = d.due;
      } else if (d.graceMs > 0 && now - d.due > d.graceMs) {
        d.graceMs = 0;
        d.due = now + 1;
        if (d.due < next) next = d.due;
      } else {
        (expired ??= []).push(d);
      }
    }
    if (next < Infinity) this.arm(next);
    if (expired === undefined) return;
    if (expired.length > 1) expired.sort((a, b) => a.due - b.due);
    for (const d of expired) {
      // An earlier one's expiry may have settled (and removed) a later one.
      if (!this.deadlines.delete(d)) continue;
      try {
        d.expire();
      } catch (error) {
        queueMicrotask(() => {
          throw error; // reported as a timer's own throw would be, without keeping the others from expiring
        });
      }
    }
  };
}

const sweeps = new WeakMap<Clock, DeadlineSweep>();

/** The clock's one sweep (made on first use). */
export function sweepOf(clock: Clock): DeadlineSweep {
  let sweep = sweeps.get(clock);
  if (sweep === undefined) sweeps.set(clock, (sweep = new DeadlineSweep(clock)));
  return sweep;
}
