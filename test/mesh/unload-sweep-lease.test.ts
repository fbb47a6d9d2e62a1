/**
 * UnloadSweep at its seam (fakes for the membership and the loader): a range marked unused two
 * plan generations ago, whose last lease closes right after the plan took it back (before the
 * plan-change microtask ran), stays loaded — the plan uses it now.
 */
import { expect, it } from 'vitest';
import { HeldRangeMap, type HeldRange } from '../../src/core/mesh/held-range.ts';
import type { Membership, MeshPeer } from '../../src/core/mesh/membership.ts';
import type { RangeLoader } from '../../src/core/mesh/range-loader.ts';
import { UnloadSweep } from '../../src/core/mesh/unload-sweep.ts';
import { ManualClock } from '../route/manual-clock.ts';

it('a range the plan took back is not unloaded when its last lease closes before the plan change is followed', async () => {
  const r = { start: 0, end: 2 };
  const other = { start: 2, end: 4 };
  const peer = { id: 'p1', ranges: [r, other] } as unknown as MeshPeer;
  const membership = { peers: [peer], get: (id: string) => (id === 'p1' ? peer : undefined), changedAt: 0 } as unknown as Membership;
  const unloaded: string[] = [];
  const loader = { unloads: () => true, isLoading: () => false, unload: async (_p: MeshPeer, range: { start: number; end: number }) => void unloaded.push(`${range.start}:${range.end}`) } as unknown as RangeLoader;
  let planned: HeldRange[] = [];
  const plan = () => planned.reduce((m, h) => m.set(h, true), new HeldRangeMap<true>());
  const sweep = new UnloadSweep(new ManualClock(), 60_000, membership, loader, plan);
  const held = { peerId: 'p1', range: r };
  const flush = () => new Promise<void>((resolve) => queueMicrotask(resolve));

  planned = [{ peerId: 'p1', range: other }]; // generation 1: r unused (marked)
  sweep.planMayHaveMoved();
  await flush();
  const close = sweep.leaseOpened(held); // a session still holds r
  planned = [{ peerId: 'p2', range: other }]; // generation 2: r due, but leased
  sweep.planMayHaveMoved();
  await flush();
  expect(unloaded, 'r is leased: it waits for its lease').toEqual([]);
  planned = [held]; // the plan takes r back; its lease closes in the same turn
  sweep.planMayHaveMoved();
  close();
  await flush();
  expect(unloaded, 'r is in the plan: it stays loaded').toEqual(['2:4']); // the other range, unused since generation 2, goes at generation 3
});
