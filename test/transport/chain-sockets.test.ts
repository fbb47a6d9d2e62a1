/**
 * Chained routes over real sockets on loopback (protocol 3.2): a head and three runPeer peers
 * in this process, each listening for direct links; with `routeMode: 'chain'` frames go
 * head → peer → peer → peer → head over peer-to-peer WebSockets the peers dial themselves
 * (authenticated with the hop proof), the head hears each hop's copy on its own link, and no
 * star frame is sent. Greedy tokens equal the one-process golden ids. A peer that cannot be
 * dialled (no listener) gets its incoming link through the head: mixed chain/relay, same
 * tokens. A peer mid-chain that shuts down is replaced, same tokens.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { ChainPort } from '../../src/core/runtime/chain-port.ts';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';
import type { RunningHead } from '../../src/node/head/head-node.ts';
import { runPeer, type RunningPeer } from '../../src/node/peer/run-peer.ts';
import { STORIES_GOLDEN } from '../engine/harness.ts';
import { CountingLink } from '../route/peer-doubles.ts';
import { collect, CountingProvider, greedy, openSession, useStories } from '../route/route-harness.ts';
import { createServer } from 'node:net';
import { randomUUID } from 'node:crypto';
import { encodeFrame } from '../../src/core/frames/frame-codec.ts';
import { encodeLaneFrame, laneFrameKind, peekLanes } from '../../src/core/frames/lane-frame-codec.ts';
import { JOIN_TOKEN, RawSocket, startStoriesHead } from './transport-harness.ts';

const stories = useStories('chain-sockets');
const heads: RunningHead[] = [];
const running: RunningPeer[] = [];

afterAll(async () => {
  for (const peer of running) await peer.close().catch(() => undefined);
  for (const head of heads) await head.close();
});

/** A head over `listening.length` peers (`listening[i]`: peer i accepts direct links); star frames and copies counted per peer. */
async function meshOf(name: string, listening: boolean[]) {
  const starFrames = new Map<string, CountingLink>();
  const copies = new Map<string, number>();
  const copyFrames = new Map<string, number>();
  const wrapLink = (link: PeerLink, peerId: string) => {
    const counted = new CountingLink(link);
    starFrames.set(peerId, counted);
    return counted;
  };
  const wrapChain = (port: ChainPort, peerId: string): ChainPort => {
    copies.set(peerId, 0);
    copyFrames.set(peerId, 0);
    port.listen({
      copy: (frame) => {
        copyFrames.set(peerId, copyFrames.get(peerId)! + 1);
        copies.set(peerId, copies.get(peerId)! + (laneFrameKind(frame) === 'copy-lanes' ? peekLanes(frame).length : 1));
      },
      report: () => {},
    });
    return port;
  };
  const head = await startStoriesHead(stories.ctx, 'relay', { wrapLink, wrapChain });
  heads.push(head);
  const peers: RunningPeer[] = [];
  for (const [i, listen] of listening.entries()) {
    const peer = await runPeer({ headUrl: head.peerUrl, ...(listen && { listenPort: 0 }), device: 'cpu', memoryBudgetBytes: 1 << 30, joinToken: JOIN_TOKEN, peerId: `${name}-${i + 1}`, threads: 1 });
    running.push(peer);
    peers.push(peer);
  }
  await head.waitForPeers(listening.length, 10_000);
  return { head, peers, provider: new CountingProvider(head.mesh), starFrames: () => [...starFrames.values()].map((l) => l.frames), copies, copyFrames };
}

describe('a chained route over sockets', () => {
  it('three listening peers: head → p1 → p2 → p3 → head, golden tokens, no star frame, every hop copied', { timeout: 60_000 }, async () => {
    const m = await meshOf('chain', [true, true, true]);
    // Load and warm the ranges first: their warm-up frames are the mesh's, not the session's.
    await m.head.mesh.route().then((leases) => Promise.all(leases.map((l) => l.link.close())));
    const warmed = m.starFrames();
    const session = openSession(stories.ctx, m.provider, greedy(), undefined, { routeMode: 'chain' });
    const { ids } = await collect(session);
    expect(ids).toEqual(STORIES_GOLDEN);
    expect(session.telemetry.hops).toHaveLength(3);
    expect(session.telemetry.links).toEqual(['direct', 'direct']);
    expect(session.telemetry.repairs).toEqual([]);
    expect(m.starFrames()).toEqual(warmed);
    for (const hop of session.telemetry.hops) expect(m.copies.get(hop.peerId)).toBe(hop.frames);
    await session.closed;
    for (const p of m.peers) expect(p.shard.kvEntries).toBe(0);
  });

  it('four sessions at once, speculation on (protocol 3.4): each batched step crosses every link as one frame, golden tokens', { timeout: 60_000 }, async () => {
    const m = await meshOf('lanes', [true, true, true]);
    await m.head.mesh.route().then((leases) => Promise.all(leases.map((l) => l.link.close())));
    const warmed = m.starFrames();
    const sessions = Array.from({ length: 4 }, () => openSession(stories.ctx, m.provider, greedy(), undefined, { routeMode: 'chain' }));
    const answers = await Promise.all(sessions.map((s) => collect(s)));
    for (const { ids } of answers) expect(ids).toEqual(STORIES_GOLDEN);
    expect(sessions.flatMap((s) => s.telemetry.repairs)).toEqual([]);
    expect(m.starFrames()).toEqual(warmed);
    expect(sessions.some((s) => s.telemetry.speculation!.drafted > 0)).toBe(true);
    const steps = sessions.reduce((n, s) => n + s.telemetry.hops[0].frames, 0);
    // Counted where they arrive: p2 and p3 hear their previous hop's frames, the head every hop's copies.
    for (const [k, peer] of m.peers.entries()) {
      const { batches, batchedEntries, singles, prefills } = peer.chains.runs;
      const runs = batches + singles + prefills;
      expect(batchedEntries).toBeGreaterThan(batches); // some steps of several sessions ran as one
      expect(m.copies.get(peer.peerId)).toBe(steps);
      // One copy frame per shard run at most: a batched run's outputs leave as one copy-lanes frame.
      expect(m.copyFrames.get(peer.peerId)).toBeLessThanOrEqual(runs);
      const next = m.peers[k + 1];
      if (!next) continue;
      // And as one chain-lanes frame to the next hop.
      expect(next.chains.received.lanes).toBe(steps);
      expect(next.chains.received.frames).toBeLessThanOrEqual(runs);
      expect(next.chains.received.frames).toBeLessThan(steps);
    }
    await Promise.all(sessions.map((s) => s.closed));
    for (const p of m.peers) expect(p.shard.kvEntries).toBe(0);
  });

  it('a peer that cannot be dialled: the link into it goes through the head, the rest chained, golden tokens', { timeout: 60_000 }, async () => {
    const m = await meshOf('mixed', [true, false, true]);
    const session = openSession(stories.ctx, m.provider, greedy(), undefined, { routeMode: 'chain' });
    await m.head.mesh.route().then((leases) => Promise.all(leases.map((l) => l.link.close())));
    const warmed = m.starFrames();
    expect((await collect(session)).ids).toEqual(STORIES_GOLDEN);
    // Planned in join order: mixed-1 cannot forward to mixed-2, which can dial mixed-3.
    expect(session.telemetry.hops.map((h) => h.peerId)).toEqual(['mixed-1', 'mixed-2', 'mixed-3']);
    // Segments [mixed-1] (a star hop: head → mixed-1 → head) and [mixed-2 → mixed-3] (chained).
    const [first, second, third] = m.starFrames().map((n, i) => n - warmed[i]);
    expect(first).toBeGreaterThan(0);
    expect(second).toBe(0);
    expect(third).toBe(0);
    expect(m.copies.get('mixed-1')).toBe(0);
    expect(m.copies.get('mixed-2')).toBe(session.telemetry.hops[1].frames);
    expect(m.copies.get('mixed-3')).toBe(session.telemetry.hops[2].frames);
    expect(session.telemetry.links).toEqual(['head', 'direct']);
    expect(session.telemetry.repairs).toEqual([]);
  });

  it('star mode over the same peers: golden tokens, no copy', { timeout: 60_000 }, async () => {
    const m = await meshOf('star', [true, true, true]);
    const session = openSession(stories.ctx, m.provider, greedy(), undefined, { routeMode: 'star' });
    expect((await collect(session)).ids).toEqual(STORIES_GOLDEN);
    expect([...m.copies.values()]).toEqual([0, 0, 0]);
    expect(session.telemetry.links).toEqual(['head', 'head']);
  });

  it('a peer mid-chain shuts down mid-stream: replaced, golden tokens', { timeout: 60_000 }, async () => {
    const m = await meshOf('killed', [true, true, true, true]);
    let tokens = 0;
    let victim: RunningPeer | undefined;
    const session = openSession(stories.ctx, m.provider, greedy(), undefined, { routeMode: 'chain' });
    const { ids } = await collect(session, async () => {
      if (++tokens !== 6) return;
      const middle = session.telemetry.hops[1].peerId;
      victim = m.peers.find((p) => p.peerId === middle)!;
      await victim.close();
    });
    expect(ids).toEqual(STORIES_GOLDEN);
    expect(session.telemetry.repairs).toEqual([expect.objectContaining({ kind: 'replaced', lostPeerId: victim!.peerId })]);
  });
});

describe('peer-to-peer links are as safe as the head\'s', () => {
  it('a dialler without the join token is refused; one with it cannot make the peer dial, nor have a frame run for an unnamed sender', { timeout: 60_000 }, async () => {
    const m = await meshOf('safe', [true]);
    const target = m.peers[0];
    await expect(RawSocket.openDirect(target.listenUrl!, { peerId: target.peerId, joinToken: 'wrong', from: 'rogue' })).rejects.toThrow(/refused the direct link|proof/);
    // A trap: anything that connects here was told to by the rogue.
    let connections = 0;
    const trap = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve));
    const port = (trap.address() as { port: number }).port;
    try {
      const rogue = await RawSocket.openDirect(target.listenUrl!, { peerId: target.peerId, joinToken: JOIN_TOKEN, from: 'rogue' });
      const sessionId = randomUUID();
      const range = { start: 0, end: 5 };
      rogue.send(JSON.stringify({ kind: 'chain', id: 'x', sessionId, range, from: 'rogue', to: { peerId: 'trap', range, url: `ws://127.0.0.1:${port}/peer/ws` } }));
      rogue.send(encodeFrame({ kind: 'chain', requestId: 1, sessionId, startPosition: 0, range, activations: { dtype: 'fp32', data: new Float32Array(64), tokens: 1, hiddenSize: 64 } }));
      // Nor as lanes of one frame (protocol 3.4), nor a malformed one (a session in two lanes).
      const lanes = encodeLaneFrame({ kind: 'chain-lanes', range, dtype: 'fp32', hiddenSize: 64, lanes: [sessionId, randomUUID()].map((id, i) => ({ sessionId: id, requestId: i + 2, startPosition: 0, activations: { dtype: 'fp32' as const, data: new Float32Array(64), tokens: 1, hiddenSize: 64 } })) });
      rogue.send(lanes);
      const twice = lanes.slice();
      twice.set(twice.subarray(48, 64), 80);
      rogue.send(twice);
      await expect(rogue.next(300)).rejects.toThrow(/no message/); // nothing is answered on a peer-to-peer link
      expect(connections).toBe(0);
      expect(target.shard.kvEntries).toBe(0);
      rogue.close();
      // The peer still serves the head.
      const session = openSession(stories.ctx, m.provider, greedy(), undefined, { routeMode: 'chain' });
      expect((await collect(session)).ids).toEqual(STORIES_GOLDEN);
    } finally {
      trap.close();
    }
  });
});

describe('meshnet peer --advertise', () => {
  it('the advertised address (not the local listener) is what the head and the previous hop dial', { timeout: 60_000 }, async () => {
    // A free port, so the advertised URL can name it before the peer listens.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const log: string[] = [];
    const head = await startStoriesHead(stories.ctx, 'direct', { allowPeerHosts: ['localhost'], log: (line) => log.push(line) });
    heads.push(head);
    const first = await runPeer({ headUrl: head.peerUrl, listenPort: 0, device: 'cpu', memoryBudgetBytes: 1 << 30, joinToken: JOIN_TOKEN, peerId: 'adv-1', threads: 1 });
    const second = await runPeer({ headUrl: head.peerUrl, listenPort: port, advertiseUrl: `ws://localhost:${port}/peer/ws`, device: 'cpu', memoryBudgetBytes: 1 << 30, joinToken: JOIN_TOKEN, peerId: 'adv-2', threads: 1 });
    running.push(first, second);
    await head.waitForPeers(2, 10_000);
    expect(second.listenUrl).toBe(`ws://localhost:${port}/peer/ws`);
    expect(head.mesh.peers.find((p) => p.id === 'adv-2')!.listenUrl).toBe(`ws://localhost:${port}/peer/ws`);
    const session = openSession(stories.ctx, new CountingProvider(head.mesh), greedy(), undefined, { routeMode: 'chain' });
    expect((await collect(session)).ids).toEqual(STORIES_GOLDEN);
    expect(session.telemetry.hops.map((h) => h.peerId)).toEqual(['adv-1', 'adv-2']);
    expect(session.telemetry.repairs).toEqual([]);
  });
});
