/**
 * Ranges follow the plan under churn: peers join and leave at every step while time stands
 * still (a manual clock: the unload grace period never passes), and after each step every
 * peer holds only ranges of the current plan or the one before it — on the mesh's books and
 * on the real ShardPeer. Each step's greedy answer equals the one-process answer. Real
 * ShardPeers over in-process links, stories260k.
 */
import { describe, expect, it } from 'vitest';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import type { RoutePlan } from '../../src/core/mesh/plan-route.ts';
import { sweepOf } from '../../src/core/runtime/deadline-sweep.ts';
import { ManualClock } from '../route/manual-clock.ts';
import { collect, createPeer, greedy, inProcessMesh, openSession, PROMPT, useStories, type EvictableShardPeer } from '../route/route-harness.ts';

const stories = useStories('churn-ranges', 8);

const key = (peerId: string, r: { start: number; end: number }) => `${peerId}@[${r.start},${r.end})`;
const hopsOf = (plan: RoutePlan) => new Set(plan.hops.map((h) => key(h.peerId, h.range)));

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(check(), what).toBe(true);
}

describe('ranges follow the plan under churn', () => {
  it('peers joining and leaving at every step, no time passing: each peer holds at most the current and the previous plan\'s ranges', async () => {
    const clock = new ManualClock();
    const t = inProcessMesh(stories.ctx, 3, undefined, { clock, unloadGraceMs: 5000 });
    const peers = new Map<string, EvictableShardPeer>(t.peers);
    const add = (id: string) => {
      const peer = createPeer(stories.ctx);
      peers.set(id, peer);
      t.mesh.addPeer({ id, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(peer) });
    };
    const remove = (id: string) => {
      t.mesh.removePeer(id);
      peers.delete(id);
    };
    const steps: (() => void)[] = [
      () => remove('p3'),
      () => add('p4'),
      () => remove('p1'),
      () => add('p5'),
      () => add('p6'),
      () => remove('p2'),
      () => add('p7'),
      () => remove('p4'),
      () => add('p8'),
      () => remove('p6'),
    ];
    const run = async () => {
      const session = openSession(stories.ctx, t.provider, greedy(8), undefined, { clock }, PROMPT);
      expect((await collect(session)).ids).toEqual(stories.expected);
      await session.closed;
    };
    await run();
    let previous = hopsOf(t.mesh.plan());
    let mostHeld = 0;
    let plansSeen = 1;
    for (const step of steps) {
      step();
      await run();
      const current = hopsOf(t.mesh.plan());
      if ([...current].some((h) => !previous.has(h))) plansSeen++;
      const allowed = new Set([...current, ...previous]);
      const onBooks = () => t.mesh.peers.flatMap((p) => p.ranges.map((r) => key(p.id, r)));
      await until(() => onBooks().every((h) => allowed.has(h)), `the mesh's books hold only the current and previous plan's ranges: ${onBooks().join(' ')} ⊄ ${[...allowed].join(' ')}`);
      const onPeers = () => [...peers].flatMap(([id, peer]) => peer.ranges.map((r) => key(id, r)));
      await until(() => onPeers().every((h) => allowed.has(h)), `the peers hold only the current and previous plan's ranges: ${onPeers().join(' ')}`);
      // The step's session may have been served by the last ready plan while the current one
      // still loads (loading runs ahead of requests, not before them): wait for it, then it stays.
      await until(() => [...current].every((h) => onPeers().includes(h)), `the current plan is loaded: ${[...current].join(' ')} ⊄ ${onPeers().join(' ')}`);
      await until(() => onPeers().every((h) => allowed.has(h)), `the peers hold only the current and previous plan's ranges: ${onPeers().join(' ')}`);
      mostHeld = Math.max(mostHeld, ...[...peers.values()].map((p) => p.ranges.length));
      previous = current;
    }
    expect(plansSeen, 'the churn made a new plan at most steps').toBeGreaterThanOrEqual(8);
    expect(mostHeld, 'no peer piles up ranges').toBeLessThanOrEqual(2);
    // Beyond the unload grace sweep, at most the deadline sweep's idle timer (it holds no deadline: time stands still here).
    expect(sweepOf(clock).size, 'no deadline left waiting').toBe(0);
    expect(clock.pending - (sweepOf(clock).armed ? 1 : 0), 'no timer beyond the grace sweep').toBeLessThanOrEqual(1);
    for (const peer of peers.values()) await peer.dispose();
  });
});
