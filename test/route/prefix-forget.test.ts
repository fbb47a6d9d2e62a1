/**
 * Peers forget what the head forgot (protocol 3.5 `forget`): the head's prefix registry holds
 * at most `maxEntries`; every entry it evicts is sent to the peers holding it, so a 3.5 peer's
 * prefix store follows the head's entry count instead of growing to its own budget. Real
 * ShardPeers (real onnxruntime, stories260k) through the Mesh. A 3.4 peer on the same route is
 * sent nothing and keeps every entry (its budget bounds it, as before). In a tree, the head
 * evicts children before their parent, so the peers' parent survives and forks from it still
 * give the one-process answer.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PrefixForgetter } from '../../src/core/route/prefix-forget.ts';
import { PrefixRegistry } from '../../src/core/route/prefix-registry.ts';
import { RouteSession } from '../../src/core/route/route-session.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import type { StatsMessage } from '../../src/shared/control.ts';
import { collect, createPeer, greedy, inProcessMesh, oneProcessTokens, useStories, type TestMesh } from './route-harness.ts';

const stories = useStories('prefix-forget');
const MAX = 6;
const SYSTEM = [1, ...Array.from({ length: 59 }, (_, i) => 3 + ((i * 37) % 500))];
/** Prompt `q`: 24 tokens, its first one different from every other prompt's. */
const prompt = (q: number) => [1, 10 + q, ...Array.from({ length: 22 }, (_, i) => 3 + ((q * 131 + i * 17) % 500))];

function registryFor(m: TestMesh, maxEntries: number) {
  const forgetter = new PrefixForgetter((id) => m.mesh.peers.find((p) => p.id === id));
  const registry = new PrefixRegistry({ maxEntries, onForget: (id, hops) => forgetter.forgotten(id, hops) });
  return { registry, forgetter };
}

async function run(m: TestMesh, promptIds: number[], registry: PrefixRegistry) {
  const session = new RouteSession(
    { head: stories.ctx.head, route: m.provider, vocabSize: stories.ctx.model.checkpoint.config.vocabSize, policy: { backoff: { baseMs: 1, maxMs: 5 } }, prefixes: registry },
    { sessionId: randomUUID(), promptIds, params: greedy(MAX) },
  );
  const { ids } = await collect(session);
  await session.closed;
  await new Promise((resolve) => setTimeout(resolve, 20)); // the forget goes out once the turn ends
  return { ids, cached: session.telemetry.cachedTokens ?? 0 };
}

const entries = (m: TestMesh, id: string) => (m.peers.get(id)!.stats() as StatsMessage).prefixEntries;

describe('peers forget the prefix entries the head forgot (3.5)', () => {
  it("a 3.5 peer's entry count follows the head's capped registry; a 3.4 peer is sent nothing and keeps them all", async () => {
    const m = inProcessMesh(stories.ctx, 1, undefined, {}, 64 * 2 ** 20);
    const old = createPeer(stories.ctx, 1 << 30, 64 * 2 ** 20);
    m.peers.set('p2', old);
    m.mesh.addPeer({ id: 'p2', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(old), protocol: { major: 3, minor: 4 } });
    const { registry, forgetter } = registryFor(m, 3);
    const counts: number[] = [];
    for (let q = 0; q < 8; q++) {
      await run(m, prompt(q), registry);
      expect(entries(m, 'p1'), `after request ${q + 1}: the head holds ${registry.size}`).toBe(registry.size);
      counts.push(entries(m, 'p1')!);
    }
    expect(counts).toEqual([1, 2, 3, 3, 3, 3, 3, 3]);
    expect(entries(m, 'p2'), 'the 3.4 peer: no forget, every entry kept').toBe(8);
    expect(forgetter.stats()).toEqual({ messages: 5, ids: 5 });
    // What is still held forks as before.
    const again = [...prompt(7), 90, 91];
    const warm = await run(m, again, registry);
    expect(warm.cached).toBeGreaterThan(0);
    expect(warm.ids).toEqual(await oneProcessTokens(stories.ctx, again, MAX));
  }, 60_000);

  it('a tree: children go before their parent on the head and so on the peers; a fork from the parent still works', async () => {
    const m = inProcessMesh(stories.ctx, 2, undefined, {}, 64 * 2 ** 20);
    const { registry } = registryFor(m, 3);
    const question = (q: number) => [...SYSTEM, 20 + q, 30 + q, 40 + q, 50 + q];
    for (let q = 0; q < 6; q++) {
      const r = await run(m, question(q), registry);
      if (q > 0) expect(r.cached, 'forked the shared system prompt').toBe(SYSTEM.length);
      for (const id of ['p1', 'p2']) expect(entries(m, id), `${id} after request ${q + 1}`).toBe(registry.size);
    }
    expect(registry.size).toBe(3);
    const last = [...SYSTEM, 99, 98, 97];
    const fromRoot = await run(m, last, registry);
    expect(fromRoot.cached, "the parent survived its children's eviction on both peers").toBe(SYSTEM.length);
    expect(fromRoot.ids).toEqual(await oneProcessTokens(stories.ctx, last, MAX));
    for (const id of ['p1', 'p2']) expect(entries(m, id)).toBe(registry.size);
  }, 60_000);
});
