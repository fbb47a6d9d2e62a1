/**
 * `withDeadline`: the one way core waits for an answer with a time limit — a frame to a hop, a
 * control message to a peer (assign, release, fork, unload, ping), a witness's replay. The
 * work gets a signal that aborts with the caller's reason when the caller's signal aborts,
 * or with the deadline's own reason when `ms` pass on the clock; the deadline and the listener
 * are freed when the work settles, whichever way. Deadlines are kept by the clock's one
 * DeadlineSweep (deadline-sweep.ts): no timer is made per call.
 */
import type { Clock } from './clock.ts';
import { MAX_TIMER_MS, sweepOf, type SweptDeadline } from './deadline-sweep.ts';


/** One call's deadline: aborts its controller with the caller's reason, or with its own when it passes. */
class CallDeadline implements SweptDeadline {
  readonly controller = new AbortController();
  constructor(
    public due: number,
    public graceMs: number,
    private readonly reason: () => unknown,
    private readonly caller: AbortSignal | undefined,
  ) {}

  expire(): void {
    this.controller.abort(this.reason());
  }

  /** The caller's signal aborted. */
  callerAborted(): void {
    this.controller.abort(this.caller!.reason);
  }
}

/**
 * The calls in flight under each caller signal (a session's: every frame to every hop). One
 * abort listener per signal, added with its first call and kept for the signal's life, hands
 * the abort to each call in the order they started — a Set entry per call instead of an
 * addEventListener/removeEventListener pair per frame, which cost the head more than the rest
 * of the frame's send path together (bench/hop-stages.ts probes). Calls that settled leave
 * their set, so a long-lived signal holds only the calls in flight.
 */
const callsUnder = new WeakMap<AbortSignal, Set<CallDeadline>>();

function callsOf(signal: AbortSignal): Set<CallDeadline> {
  let calls = callsUnder.get(signal);
  if (calls === undefined) {
    const set = (calls = new Set());
    callsUnder.set(signal, set);
    signal.addEventListener(
      'abort',
      () => {
        const aborted = [...set];
        set.clear();
        for (const call of aborted) call.callerAborted();
      },
      { once: true },
    );
  }
  return calls;
}

/**
 * `work(signal)` within `ms` on `clock` (undefined: no deadline, `work` gets the caller's
 * signal as it is). `reason()` makes the abort reason when the deadline passes (created then,
 * not before). Rejects as `work` does: with the abort reason when the work honours its signal.
 */
export async function withDeadline<T>(
  clock: Clock,
  ms: number | undefined,
  reason: () => unknown,
  work: (signal: AbortSignal | undefined) => Promise<T>,
  signal?: AbortSignal,
  lagGraceMs = 0,
): Promise<T> {
  if (ms === undefined) return work(signal);
  // Past the host's timer range (or not a time at all): a timer of its own, as before the sweep (the host decides what it does).
  if (!(ms >= 0 && ms <= MAX_TIMER_MS)) return withOwnTimer(clock, ms, reason, work, signal, lagGraceMs);
  // With `lagGraceMs`, a deadline whose sweep runs more than that late (the event loop was
  // stalled: a garbage-collection pause, a busy head) waits one more millisecond, so an
  // answer that arrived during the stall — timers run before pending socket reads — is read first.
  const deadline = new CallDeadline(clock.now() + ms, lagGraceMs, reason, signal);
  let calls: Set<CallDeadline> | undefined;
  if (signal?.aborted) deadline.callerAborted();
  else if (signal !== undefined) (calls = callsOf(signal)).add(deadline);
  const sweep = sweepOf(clock);
  sweep.add(deadline);
  try {
    return await work(deadline.controller.signal);
  } finally {
    sweep.delete(deadline);
    calls?.delete(deadline);
  }
}

/** withDeadline with a timer of its own (a time the sweep does not take: negative, NaN, past the host's timer range). */
async function withOwnTimer<T>(clock: Clock, ms: number, reason: () => unknown, work: (signal: AbortSignal | undefined) => Promise<T>, signal: AbortSignal | undefined, lagGraceMs: number): Promise<T> {
  const deadline = new AbortController();
  const onAbort = () => deadline.abort(signal!.reason);
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  const armedAt = clock.now();
  let cancel = clock.setTimeout(function expire() {
    if (lagGraceMs > 0 && clock.now() - armedAt - ms > lagGraceMs) {
      lagGraceMs = 0;
      cancel = clock.setTimeout(expire, 1);
      return;
    }
    deadline.abort(reason());
  }, ms);
  try {
    return await work(deadline.signal);
  } finally {
    cancel();
    signal?.removeEventListener('abort', onAbort);
  }
}
