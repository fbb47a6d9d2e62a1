/**
 * Racing work against abort signals without `AbortSignal.any` (which allocates a combined
 * signal per call — this runs per frame — and in Node 20 keeps dependents of long-lived
 * signals around until a GC).
 */

/** `work`'s result, or a rejection with the reason of the first of `signals` to abort. */
export function untilAborted<T>(work: Promise<T>, ...signals: (AbortSignal | undefined)[]): Promise<T> {
  for (const signal of signals) if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const listeners: [AbortSignal, () => void][] = [];
    const cleanup = () => {
      for (const [signal, listener] of listeners) signal.removeEventListener('abort', listener);
    };
    for (const signal of signals) {
      if (!signal) continue;
      const listener = () => {
        cleanup();
        reject(signal.reason);
      };
      signal.addEventListener('abort', listener, { once: true });
      listeners.push([signal, listener]);
    }
    work.then(
      (value) => {
        cleanup();
        resolve(value);
      },
      (error: unknown) => {
        cleanup();
        reject(error);
      },
    );
  });
}
