/**
 * Each prefix once (issue 27): prefix entries as a tree. N greedy requests of one 200-token
 * system prompt with different questions, through two real ShardPeers (real onnxruntime,
 * stories260k): each hop holds the shared positions once — its prefix KV is the first
 * sequence plus each other's tail, and so are the head's recorded inputs — not N copies.
 * Sessions forked from a child (its parent's positions joined with its own) and from the
 * root give the one-process greedy answers. Under a budget, children go before their parent;
 * a fork from an evicted one starts cold, with the same answer. A peer that announced protocol
 * 3.2 is sent no parent and keeps whole copies, which fork the same.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PrefixRegistry } from '../../src/core/route/prefix-registry.ts';
import { RouteSession } from '../../src/core/route/route-session.ts';
import type { StatsMessage } from '../../src/shared/control.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { collect, createPeer, greedy, inProcessMesh, oneProcessTokens, useStories, type TestMesh } from './route-harness.ts';

const stories = useStories('prefix-tree');
const MAX = 8;
const SYSTEM = [1, ...Array.from({ length: 199 }, (_, i) => 3 + ((i * 37) % 500))];
/** Question `q`: 6 tokens, its first one different from every other question's. */
const question = (q: number) => [10 + q, ...Array.from({ length: 5 }, (_, i) => 3 + ((q * 131 + i * 17) % 500))];

async function run(m: TestMesh, prompt: number[], registry: PrefixRegistry) {
  const session = new RouteSession(
    { head: stories.ctx.head, route: m.provider, vocabSize: stories.ctx.model.checkpoint.config.vocabSize, policy: { backoff: { baseMs: 1, maxMs: 5 } }, prefixes: registry },
    { sessionId: randomUUID(), promptIds: prompt, params: greedy(MAX) },
  );
  const { ids } = await collect(session);
  await session.closed;
  // What the session left behind: its prompt and every sampled token but the last (never fed).
  return { ids, sequence: [...prompt, ...ids.slice(0, -1)], cached: session.telemetry.cachedTokens ?? 0 };
}

const peerStats = (m: TestMesh) => [...m.peers.values()].map((p) => p.stats() as StatsMessage);

describe('prefix entries as a tree', () => {
  it('N answers to one system prompt: the shared positions held once per hop, on the peers and the head; forks from a child and from the root give the one-process answers; children are evicted before their parent', async () => {
    const m = inProcessMesh(stories.ctx, 2, undefined, {}, 64 * 2 ** 20);
    const registry = new PrefixRegistry();
    const hidden = stories.ctx.model.checkpoint.config.hiddenSize;

    const first = await run(m, [...SYSTEM, ...question(0)], registry);
    const perPosition = peerStats(m).map((s) => s.prefixBytes! / first.sequence.length);
    for (const b of perPosition) expect(Number.isInteger(b) && b > 0, `bytes per position ${b}`).toBe(true);
    const runs = [first];
    for (let q = 1; q < 4; q++) runs.push(await run(m, [...SYSTEM, ...question(q)], registry));
    for (const r of runs.slice(1)) expect(r.cached, 'each later request forked the system prompt').toBe(SYSTEM.length);

    // Distinct positions: the first sequence, then each other's tail after the shared system prompt.
    const distinct = first.sequence.length + runs.slice(1).reduce((n, r) => n + r.sequence.length - SYSTEM.length, 0);
    const copies = runs.reduce((n, r) => n + r.sequence.length, 0);
    const peers = peerStats(m);
    expect(peers.map((s) => s.prefixEntries)).toEqual([4, 4]);
    peers.forEach((s, i) => expect(s.prefixBytes, `peer p${i + 1}: shared + Σ tails, not ${copies} positions`).toBe(perPosition[i] * distinct));
    expect(registry.size).toBe(4);
    expect(registry.stats().inputBytes, "the head's recorded inputs: shared + Σ tails, per hop").toBe(2 * hidden * 4 * distinct);
    console.log(`prefix tree: 4 sequences of ${runs.map((r) => r.sequence.length).join('/')} positions hold ${distinct} per hop (${copies} as copies); peer bytes ${peers.map((s) => s.prefixBytes).join(', ')}, head inputs ${registry.stats().inputBytes}`);

    // A fork from a child (the root's 200 positions joined with the child's tail) and one from the root only.
    const fromChild = [...runs[2].sequence, 40, 41, 42, 43];
    const fromRoot = [...SYSTEM, ...question(9)];
    const [childRun, rootRun] = [await run(m, fromChild, registry), await run(m, fromRoot, registry)];
    expect(childRun.cached).toBe(runs[2].sequence.length);
    expect(rootRun.cached).toBe(SYSTEM.length);
    expect(childRun.ids).toEqual(await oneProcessTokens(stories.ctx, fromChild, MAX));
    expect(rootRun.ids).toEqual(await oneProcessTokens(stories.ctx, fromRoot, MAX));

    // A budget of the root alone: every child goes first, the root stays, and a fork from it still works.
    const rootBytes = perPosition.map((b) => b * first.sequence.length);
    [...m.peers.values()].forEach((p, i) => p.setPrefixBudget(rootBytes[i]));
    expect(peerStats(m).map((s) => [s.prefixEntries, s.prefixBytes])).toEqual(rootBytes.map((b) => [1, b]));
    const again = [...SYSTEM, ...question(11)];
    const rootAgain = await run(m, again, registry);
    expect(rootAgain.cached).toBe(SYSTEM.length);
    expect(rootAgain.ids).toEqual(await oneProcessTokens(stories.ctx, again, MAX));

    // The root evicted with its child on p1 (the session just left one behind): none left, and a
    // fork from that child misses on p1 and starts cold, with the same answer.
    const p1 = m.peers.get('p1')!;
    p1.setPrefixBudget(0);
    expect(p1.stats()).toMatchObject({ prefixEntries: 0, prefixBytes: 0 });
    const missed = [...rootAgain.sequence, 50, 51];
    const misses = registry.stats().misses;
    const cold = await run(m, missed, registry);
    expect(cold.cached).toBe(0);
    expect(registry.stats().misses).toBe(misses + 1);
    expect(cold.ids).toEqual(await oneProcessTokens(stories.ctx, missed, MAX));
    for (const s of peerStats(m)) expect(s).toMatchObject({ kvEntries: 0, kvBytes: 0 });
  }, 60_000);

  it('a 3.2 peer is sent no parent: it keeps whole copies, the 3.3 peer tails; forks from the child still give the one-process answer', async () => {
    const m = inProcessMesh(stories.ctx, 1, undefined, {}, 64 * 2 ** 20);
    const old = createPeer(stories.ctx, 1 << 30, 64 * 2 ** 20);
    m.peers.set('p2', old);
    m.mesh.addPeer({ id: 'p2', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(old), protocol: { major: 3, minor: 2 } });
    const registry = new PrefixRegistry();
    const first = await run(m, [...SYSTEM, ...question(0)], registry);
    const perPosition = peerStats(m).map((s) => s.prefixBytes! / first.sequence.length);
    const second = await run(m, [...SYSTEM, ...question(1)], registry);
    expect(second.cached).toBe(SYSTEM.length);
    const [tree, whole] = peerStats(m);
    expect(tree.prefixBytes, 'the 3.3 peer: the first sequence and the second tail').toBe(perPosition[0] * (first.sequence.length + second.sequence.length - SYSTEM.length));
    expect(whole.prefixBytes, 'the 3.2 peer: two whole copies').toBe(perPosition[1] * (first.sequence.length + second.sequence.length));
    const fromChild = [...second.sequence, 40, 41];
    const warm = await run(m, fromChild, registry);
    expect(warm.cached).toBe(second.sequence.length);
    expect(warm.ids).toEqual(await oneProcessTokens(stories.ctx, fromChild, MAX));
  }, 60_000);
});
