/**
 * Prefix reuse across requests: a finished session's KV stays on its hops as a prefix
 * entry; the next chat turn (its prompt = the conversation so far + a new message) forks
 * from it and prefills only the rest. Same tokens as a cold run of the same prompt, fewer
 * prefill positions sent (counted per hop), `cachedTokens` in usage; after the peers evict
 * the entry, still the same tokens (cold). A shared entry is never written in place (two
 * sessions fork from it and its bytes do not change). Prefix entries have their own budget
 * and figures, apart from live sessions' KV, which returns to zero after release.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { PrefixRegistry } from '../../src/core/route/prefix-registry.ts';
import { RouteSession } from '../../src/core/route/route-session.ts';
import type { SessionEvent } from '../../src/core/route/route-types.ts';
import type { RouteProvider } from '../../src/core/mesh/route-provider.ts';
import type { StatsMessage } from '../../src/shared/control.ts';
import { SocketLink } from '../../src/core/runtime/socket-link.ts';
import { dialSocket } from '../../src/node/net/ws-dial.ts';
import { startDirectPeerServer, type DirectPeerServer } from '../transport/transport-harness.ts';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';
import { collect, createPeer, greedy, inProcessMesh, type TestMesh, useStories } from './route-harness.ts';

const stories = useStories('prefix');
const servers: DirectPeerServer[] = [];
// Runs before useStories' own clean-up (after-hooks run last registered first).
afterAll(async () => {
  for (const server of servers) await server.close();
});

const FIRST = [1, ...Array.from({ length: 23 }, (_, i) => 5 + ((i * 29) % 400))];
const MAX = 12;

function open(provider: RouteProvider, prompt: number[], prefixes?: PrefixRegistry) {
  return new RouteSession(
    { head: stories.ctx.head, route: provider, vocabSize: stories.ctx.model.checkpoint.config.vocabSize, policy: { backoff: { baseMs: 1, maxMs: 5 } }, prefixes },
    { sessionId: randomUUID(), promptIds: prompt, params: greedy(MAX) },
  );
}

async function run(provider: RouteProvider, prompt: number[], prefixes?: PrefixRegistry, onToken?: (s: RouteSession, n: number) => void) {
  const session = open(provider, prompt, prefixes);
  const { ids, done } = await collect(session, (n) => onToken?.(session, n));
  await session.closed;
  return { ids, done: done as Extract<SessionEvent, { type: 'done' }>, session, sent: session.telemetry.hops.map((h) => h.tokens) };
}

const stats = (m: TestMesh) => [...m.peers.values()].map((p) => p.stats() as StatsMessage);

describe('prefix reuse', () => {
  it('a second turn gives the cold tokens with fewer prefill positions; after eviction, still the same tokens', async () => {
    const m = inProcessMesh(stories.ctx, 2, undefined, {}, 64 * 2 ** 20);
    const registry = new PrefixRegistry({ minTokens: 4 });
    const turn1 = await run(m.provider, FIRST, registry);
    expect(turn1.ids).toHaveLength(MAX);
    expect(registry.size).toBe(1);
    // The first turn's KV: released from live sessions, kept as prefix entries.
    for (const s of stats(m)) expect(s).toMatchObject({ kvEntries: 0, kvBytes: 0, prefixEntries: 1 });
    for (const s of stats(m)) expect(s.prefixBytes).toBeGreaterThan(0);
    expect(turn1.session.telemetry.releases.map((r) => r.keptPrefixes)).toEqual([1, 1]);

    const second = [...FIRST, ...turn1.ids, 7, 8, 9, 10, 11];
    const cold = await run(m.provider, second); // no registry: a cold start
    const warm = await run(m.provider, second, registry);
    expect(warm.ids).toEqual(cold.ids);
    const held = FIRST.length + MAX - 1; // the last sampled token of turn 1 was never fed
    expect(warm.session.telemetry.cachedTokens).toBe(held);
    expect(warm.done.usage.cachedTokens).toBe(held);
    expect(cold.done.usage.cachedTokens).toBeUndefined();
    // Each hop was sent `held` fewer positions.
    expect(warm.sent).toEqual(cold.sent.map((n) => n - held));
    expect(stats(m).every((s) => s.prefixHits === 1)).toBe(true);

    // The peers evict every entry: the fork misses, the session starts cold, same tokens.
    for (const peer of m.peers.values()) peer.evictPrefixes();
    const third = [...second, ...warm.ids, 12, 13];
    const coldThird = await run(m.provider, third);
    const afterEviction = await run(m.provider, third, registry);
    expect(afterEviction.ids).toEqual(coldThird.ids);
    expect(afterEviction.session.telemetry.cachedTokens).toBeUndefined();
    expect(afterEviction.sent).toEqual(coldThird.sent);
    expect(registry.stats()).toMatchObject({ hits: 1, misses: 1 });
    for (const s of stats(m)) expect(s).toMatchObject({ kvEntries: 0, kvBytes: 0 });
  }, 60_000);

  it('a shared entry is never written in place: two sessions fork from it, a cache miss replays through it', async () => {
    const m = inProcessMesh(stories.ctx, 2, undefined, {}, 64 * 2 ** 20);
    const registry = new PrefixRegistry({ minTokens: 4 });
    await run(m.provider, FIRST, registry);
    const before = [...m.peers.values()].map((p) => p.prefixChecksums());
    expect(before.map((b) => b.size)).toEqual([1, 1]);
    const a = [...FIRST, 40, 41, 42];
    const b = [...FIRST, 50, 51];
    const [coldA, coldB] = [await run(m.provider, a), await run(m.provider, b)];
    // Both fork from the same entry at once; one also loses its KV on hop 2 mid-way.
    const p2 = m.peers.get('p2')!;
    const [warmA, warmB] = await Promise.all([
      run(m.provider, a, registry),
      run(m.provider, b, registry, (s, n) => {
        if (n === 4) expect(p2.evictSession(s.sessionId)).toBe(1);
      }),
    ]);
    expect(warmA.ids).toEqual(coldA.ids);
    expect(warmB.ids).toEqual(coldB.ids);
    expect(warmA.session.telemetry.cachedTokens).toBe(FIRST.length);
    expect(warmB.session.telemetry.cachedTokens).toBe(FIRST.length);
    expect(warmB.session.telemetry.repairs.map((r) => r.kind)).toEqual(['cache_miss']);
    // The first turn's entries are byte for byte what they were (each fork copied them).
    const peersNow = [...m.peers.values()];
    // New entries were added by the two finished sessions; the old ones are still there, unchanged.
    expect(peersNow.map((p) => (p.stats() as StatsMessage).prefixEntries)).toEqual([3, 3]);
    peersNow.forEach((peer, i) => {
      const now = peer.prefixChecksums();
      for (const [id, sum] of before[i]) expect(now.get(id), `entry ${id} on p${i + 1}`).toBe(sum);
    });
  }, 60_000);

  it('over socket links: keepPrefix and fork cross the wire', async () => {
    const peers = [createPeer(stories.ctx, 1 << 30, 64 * 2 ** 20), createPeer(stories.ctx, 1 << 30, 64 * 2 ** 20)];
    const links = new Map<string, PeerLink>();
    for (const [i, peer] of peers.entries()) {
      const server = await startDirectPeerServer(peer);
      servers.push(server);
      const dialed = await dialSocket(server.url);
      const link = new SocketLink(dialed.socket, { timeoutMs: 30_000 });
      dialed.attach(link);
      links.set(`p${i + 1}`, link);
    }
    const m = inProcessMesh(stories.ctx, 2, (id) => links.get(id)!);
    const registry = new PrefixRegistry({ minTokens: 4 });
    const turn1 = await run(m.provider, FIRST, registry);
    const second = [...FIRST, ...turn1.ids, 3, 4];
    const cold = await run(m.provider, second);
    const warm = await run(m.provider, second, registry);
    expect(warm.ids).toEqual(cold.ids);
    expect(warm.session.telemetry.cachedTokens).toBe(FIRST.length + MAX - 1);
    for (const peer of peers) expect(peer.stats()).toMatchObject({ kvEntries: 0, prefixHits: 1 });
    for (const peer of peers) await peer.dispose();
  }, 60_000);

  it('prefix entries have their own budget: one that does not fit is not kept, live KV still returns to zero', async () => {
    const m = inProcessMesh(stories.ctx, 2, undefined, {}, 1024); // far less than one entry
    const registry = new PrefixRegistry({ minTokens: 4 });
    const first = await run(m.provider, FIRST, registry);
    expect(first.session.telemetry.releases.map((r) => r.keptPrefixes)).toEqual([0, 0]);
    expect(registry.size).toBe(0);
    for (const s of stats(m)) expect(s).toMatchObject({ kvEntries: 0, kvBytes: 0, prefixEntries: 0, prefixBytes: 0, prefixBudgetBytes: 1024 });
  }, 60_000);
});
