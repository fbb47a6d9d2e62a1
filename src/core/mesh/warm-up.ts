/**
 * Warm-up: load the planned ranges on their peers once the mesh has been quiet for a moment,
 * so the first request does not wait — and peers joining one after another (local peers at
 * start) do not each load a range of a plan that lasts milliseconds. While peers the head
 * expects (its local peers) have not all joined, it waits for them, for at most
 * `expectWithinMs` from the start.
 */
import { systemClock, type Clock } from '../runtime/clock.ts';
import type { Mesh } from './mesh.ts';

export interface WarmUpOptions {
  readonly clock?: Clock;
  /** How long the mesh stays unchanged before the plan is loaded (default 500 ms). */
  readonly quietMs?: number;
  /** Peers expected to join soon (besides the head); no warm-up before they did… */
  readonly expectPeers?: number;
  /** …for at most this long from the start (default 30 s). */
  readonly expectWithinMs?: number;
  /** A plan that could not be loaded (the route is not ready yet). */
  readonly onError?: (error: unknown) => void;
}

/** Keep `mesh`'s plan loaded ahead of requests; returns the function that stops it. */
export function warmUp(mesh: Mesh, options: WarmUpOptions = {}): () => void {
  const clock = options.clock ?? systemClock;
  const startedAt = clock.now();
  const quietMs = options.quietMs ?? 500;
  let cancel: (() => void) | undefined;
  const schedule = () => {
    cancel?.();
    cancel = clock.setTimeout(() => {
      cancel = undefined;
      const expected = options.expectPeers ?? 0;
      if (expected > 0 && mesh.remotePeerCount < expected && clock.now() - startedAt < (options.expectWithinMs ?? 30_000)) return;
      void mesh.prepare().catch((error: unknown) => options.onError?.(error));
    }, quietMs);
  };
  const off = mesh.onChange(schedule);
  schedule();
  return () => {
    off();
    cancel?.();
  };
}
