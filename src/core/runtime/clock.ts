/**
 * The Clock seam: time and timers for everything in core that waits (hop deadlines,
 * back-off before a replacement, quarantine back-off, peer waits). Tests inject a manual
 * clock and move time themselves, so deadlines are tested without sleeping.
 *
 * Contract: `now()` is milliseconds on a fixed origin (the system clock: since the epoch,
 * with sub-millisecond resolution); `setTimeout` calls `callback` once, no earlier than `ms`
 * from now, unless the returned cancel function ran first. Timers never keep a process alive.
 */
export interface Clock {
  now(): number;
  setTimeout(callback: () => void, ms: number): () => void;
}

/** The host's clock: `performance` time since the epoch, and unref'd timers where the host has them. */
export const systemClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  setTimeout(callback, ms) {
    const timer = setTimeout(callback, ms) as unknown as { unref?: () => void };
    timer.unref?.();
    return () => clearTimeout(timer as unknown as ReturnType<typeof setTimeout>);
  },
};

/** Resolves after `ms` on `clock` (at once for `ms` ≤ 0); rejects with the signal's reason when it aborts first. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    if (!(ms > 0)) return resolve();
    const onAbort = () => {
      cancel();
      reject(signal!.reason);
    };
    const cancel = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
