/** routeReadiness over plain objects: --min-peers first, then the planner's verdict. */
import { describe, expect, it } from 'vitest';
import { routeReadiness, type ReadinessSource } from '../../src/core/mesh/readiness.ts';
import { RouteUnavailableError } from '../../src/core/mesh/plan-error.ts';
import type { RoutePlan } from '../../src/core/mesh/plan-route.ts';

const plan = { hops: [{ peerId: 'head', range: { start: 0, end: 4 } }] } as unknown as RoutePlan;
const mesh = (remotePeerCount: number, planned: RoutePlan | Error): ReadinessSource => ({
  remotePeerCount,
  plan() {
    if (planned instanceof Error) throw planned;
    return planned;
  },
});

describe('routeReadiness', () => {
  it('is ready with the plan when there is a route and no minimum', () => {
    expect(routeReadiness(mesh(0, plan))).toEqual({ ready: true, plan });
  });

  it('waits for --min-peers even when the head alone could serve', () => {
    expect(routeReadiness(mesh(1, plan), 2)).toEqual({ ready: false, reason: 'waiting for peers: 1 of the 2 that --min-peers asks for have joined' });
    expect(routeReadiness(mesh(2, plan), 2)).toEqual({ ready: true, plan });
  });

  it("gives the planner's reason when there is no route", () => {
    expect(routeReadiness(mesh(3, new RouteUnavailableError('no peer holds layers [0, 4)')), 2)).toEqual({ ready: false, reason: 'route unavailable: no peer holds layers [0, 4)' });
  });
});
