/**
 * UnloadSweep at its seam (fakes for the membership and the loader): a peer keeps the ranges
 * of the current and the previous plan generation, a leased range and a range the plan takes
 * back in the turn its last lease closes (before the plan-change microtask ran); a range in
 * neither recent plan goes at the change that leaves it out, or when its last lease closes.
 */
import { expect, it } from 'vitest';
import { HeldRangeMap, type HeldRange } from '../../src/core/mesh/held-range.ts';
import type { Membership, MeshPeer } from '../../src/core/mesh/membership.ts';
import type { RangeLoader } from '../../src/core/mesh/range-loader.ts';
import { UnloadSweep } from '../../src/core/mesh/unload-sweep.ts';
import { ManualClock } from '../route/manual-clock.ts';

function sweepOver(ranges: { start: number; end: number }[]) {
  const peer = { id: 'p1', ranges: [...ranges] } as unknown as MeshPeer;
  const membership = { peers: [peer], get: (id: string) => (id === 'p1' ? peer : undefined), changedAt: 0 } as unknown as Membership;
  const unloaded: string[] = [];
  const loader = {
    unloads: () => true,
    isLoading: () => false,
    unload: async (_p: MeshPeer, range: { start: number; end: number }) => {
      unloaded.push(`${range.start}:${range.end}`);
      peer.ranges.splice(peer.ranges.findIndex((r) => r.start === range.start && r.end === range.end), 1);
    },
  } as unknown as RangeLoader;
  const state = { planned: [] as HeldRange[] };
  const plan = () => state.planned.reduce((m, h) => m.set(h, true), new HeldRangeMap<true>());
  const sweep = new UnloadSweep(new ManualClock(), 60_000, membership, loader, plan);
  const flush = () => new Promise<void>((resolve) => queueMicrotask(resolve));
  const change = async (planned: HeldRange[]) => {
    state.planned = planned;
    sweep.planMayHaveMoved();
    await flush();
  };
  return { sweep, unloaded, state, change, flush };
}

it('a range the plan took back is not unloaded when its last lease closes before the plan change is followed', async () => {
  const r = { start: 0, end: 2 };
  const other = { start: 2, end: 4 };
  const { sweep, unloaded, state, change, flush } = sweepOver([r, other]);
  const held = { peerId: 'p1', range: r };
  const close = sweep.leaseOpened(held); // a session holds r
  await change([{ peerId: 'p1', range: other }]); // generation 1: r in no plan, but leased
  await change([{ peerId: 'p2', range: other }]); // generation 2: p1's other is the previous plan's
  expect(unloaded, 'r is leased, the other range is in the previous plan').toEqual([]);
  state.planned = [held]; // the plan takes r back; its lease closes in the same turn
  sweep.planMayHaveMoved();
  close();
  await flush();
  expect(unloaded, 'r is in the plan: it stays loaded; the other range is in neither recent plan').toEqual(['2:4']);
});

it('a range in neither recent plan goes when its last lease closes; one of the previous plan stays', async () => {
  const repair = { start: 4, end: 5 };
  const before = { start: 0, end: 2 };
  const now = { start: 0, end: 3 };
  const { sweep, unloaded, change } = sweepOver([before, repair, now]);
  const closeRepair = sweep.leaseOpened({ peerId: 'p1', range: repair }); // loaded for a repair, in no plan
  await change([{ peerId: 'p1', range: before }]);
  expect(unloaded, 'a range in neither recent plan and not leased goes at the change').toEqual(['0:3']);
  const closeBefore = sweep.leaseOpened({ peerId: 'p1', range: before });
  await change([{ peerId: 'p1', range: { start: 0, end: 5 } }]); // before is the previous plan's now
  expect(unloaded).toEqual(['0:3']);
  closeBefore();
  expect(unloaded, 'the previous plan\'s range stays after its lease closes').toEqual(['0:3']);
  closeRepair();
  expect(unloaded, 'the repair range goes as its last lease closes, no plan change needed').toEqual(['0:3', '4:5']);
});
