/**
 * The same Route Session gives the same tokens over every link kind: in-process, direct
 * (the head dials each peer's listener) and relay (frames ride the peer's own socket to the
 * head) — two stories260k peers running in this process via runPeer, `headLayers: 'none'`.
 * Also peer loss over relay: a peer that shuts down mid-generation is replaced.
 * Per-hop latency (telemetry totalMs / frames) is printed for each link kind.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { RouteSession } from '../../src/core/route/route-session.ts';
import type { RunningHead } from '../../src/node/head/head-node.ts';
import { runPeer, type RunningPeer } from '../../src/node/peer/run-peer.ts';
import { STORIES_GOLDEN } from '../engine/harness.ts';
import { collect, CountingProvider, greedy, inProcessMesh, openSession, useStories } from '../route/route-harness.ts';
import { JOIN_TOKEN, startStoriesHead } from './transport-harness.ts';

const stories = useStories('same-outputs');
const heads: RunningHead[] = [];
const peers: RunningPeer[] = [];

afterAll(async () => {
  for (const peer of peers) await peer.close();
  for (const head of heads) await head.close();
});

async function meshOf(link: 'relay' | 'direct', count: number, log: string[] = []) {
  const head = await startStoriesHead(stories.ctx, link, { log: (line) => log.push(line) });
  heads.push(head);
  const joined: RunningPeer[] = [];
  for (let i = 1; i <= count; i++) {
    const peer = await runPeer({
      headUrl: head.peerUrl,
      ...(link === 'direct' && { listenPort: 0 }),
      device: 'cpu',
      memoryBudgetBytes: 1 << 30,
      joinToken: JOIN_TOKEN,
      peerId: `${link}-${heads.length}-${i}`,
      threads: 1,
    });
    peers.push(peer);
    joined.push(peer);
  }
  await head.waitForPeers(count, 10_000);
  return { head, peers: joined, provider: new CountingProvider(head.mesh) };
}

function perHop(session: RouteSession): string {
  return session.telemetry.hops
    .map((h) => `${h.peerId}[${h.range.start},${h.range.end}) ${(h.totalMs / h.frames).toFixed(3)} ms/frame over ${h.frames} frames (${h.tokens} tokens)`)
    .join('; ');
}

describe('same outputs over every link kind', () => {
  it('in-process: two hops give the golden tokens', async () => {
    const t = inProcessMesh(stories.ctx, 2);
    const session = openSession(stories.ctx, t.provider, greedy());
    expect((await collect(session)).ids).toEqual(STORIES_GOLDEN);
    expect(session.telemetry.hops).toHaveLength(2);
    console.log(`per-hop latency, in-process: ${perHop(session)}`);
  });

  for (const link of ['direct', 'relay'] as const) {
    it(`${link}: two runPeer peers give the golden tokens, and every lease and KV entry is freed`, async () => {
      const log: string[] = [];
      const m = await meshOf(link, 2, log);
      expect(log.filter((line) => line.includes(`${link} link`))).toHaveLength(2);
      const session = openSession(stories.ctx, m.provider, greedy());
      const { ids, done } = await collect(session);
      expect(ids).toEqual(STORIES_GOLDEN);
      expect(done).toMatchObject({ type: 'done', finishReason: 'length' });
      expect(session.telemetry.hops.map((h) => h.peerId).sort()).toEqual(m.peers.map((p) => p.peerId).sort());
      expect(session.telemetry.repairs).toEqual([]);
      await session.closed; // hops are released in the background, after the client was answered
      expect(session.telemetry.releases.map((r) => r.freedEntries)).toEqual([1, 1]);
      expect(m.provider.openLeases).toBe(0);
      for (const peer of m.peers) expect(peer.shard.kvEntries).toBe(0);
      console.log(`per-hop latency, ${link}: ${perHop(session)}`);
    });
  }

  it('relay peer loss: a peer that shuts down mid-generation is replaced by the third, tokens unchanged', async () => {
    const m = await meshOf('relay', 3);
    let session!: RouteSession;
    let lost = '';
    session = openSession(stories.ctx, m.provider, greedy());
    const { ids } = await collect(session, async (n) => {
      if (n !== 12) return;
      lost = session.telemetry.hops[1].peerId;
      await m.peers.find((p) => p.peerId === lost)!.close();
    });
    expect(ids).toEqual(STORIES_GOLDEN);
    const repair = session.telemetry.repairs.find((r) => r.kind === 'replaced');
    expect(repair).toMatchObject({ hop: 1, lostPeerId: lost });
    expect(m.peers.map((p) => p.peerId).filter((id) => id !== lost)).toContain(repair!.peerId);
    expect(m.head.mesh.peers.map((p) => p.id)).not.toContain(lost);
    await session.closed;
    expect(m.provider.openLeases).toBe(0);
    for (const peer of m.peers.filter((p) => p.peerId !== lost)) expect(peer.shard.kvEntries).toBe(0);
  });
});
