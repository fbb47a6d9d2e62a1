/**
 * `withDeadline`: the one way core waits for an answer with a time limit — a frame to a hop, a
 * control message to a peer (assign, release, fork, unload, ping), a witness's replay. The
 * work gets a signal that aborts with the caller's reason when the caller's signal aborts,
 * or with the deadline's own reason when `ms` pass on the clock; the timer and the listener
 * are freed when the work settles, whichever way.
 */
import type { Clock } from './clock.ts';

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
  const deadline = new AbortController();
  const onAbort = () => deadline.abort(signal!.reason);
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  // With `lagGraceMs`, a timer that fires more than that late (the event loop was stalled: a
  // garbage-collection pause, a busy head) waits one more turn of the loop (a 1 ms timer), so
  // an answer that arrived during the stall — timers run before pending socket reads — is read first.
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
