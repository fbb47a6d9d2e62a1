/**
 * Readiness: would the head serve a request right now? Yes only when `--min-peers` is met
 * and the planner finds a route over the peers that are up; otherwise the reason, in words
 * a user can act on. A small function over what the mesh already knows, so `/health` and
 * admission ask the same question (`/health` answers 503 with `reason` when not ready).
 */
import type { RoutePlan } from './plan-route.ts';

/** What readiness reads from the mesh (the `Mesh` has both). */
export interface ReadinessSource {
  /** The current plan; throws (RouteUnavailableError) when there is none. */
  plan(): RoutePlan;
  /** Peers that joined, the head not counted. */
  readonly remotePeerCount: number;
}

export type Readiness = { readonly ready: true; readonly plan: RoutePlan } | { readonly ready: false; readonly reason: string };

/** `minPeers`: `--min-peers` (0 = no minimum). */
export function routeReadiness(mesh: ReadinessSource, minPeers = 0): Readiness {
  const joined = mesh.remotePeerCount;
  if (joined < minPeers) {
    return { ready: false, reason: `waiting for peers: ${joined} of the ${minPeers} that --min-peers asks for have joined` };
  }
  try {
    return { ready: true, plan: mesh.plan() };
  } catch (error) {
    return { ready: false, reason: error instanceof Error ? error.message : String(error) };
  }
}
