/**
 * Characterization of RouteSession through its interface, over in-process links to real
 * ShardPeers running stories260k shards: hops, cache-miss re-prefill, peer loss,
 * cancellation and cleanup.
 */
import { describe, expect, it } from 'vitest';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { RouteUnavailableError } from '../../src/core/mesh/plan-error.ts';
import { STORIES_GOLDEN } from '../engine/harness.ts';
import { decodeFrame } from '../../src/core/frames/frame-codec.ts';
import { CountingLink, FaultyPeer, GateLink } from './peer-doubles.ts';
import { collect, greedy, inProcessMesh, oneProcessTokens, openSession, PROMPT, useStories } from './route-harness.ts';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';

const FP32 = weightSpec('fp32');

const stories = useStories('route');

describe('RouteSession', () => {
  for (const hops of [1, 2, 3]) {
    it(`prefill and decode over ${hops} hop(s) give the one-process tokens`, async () => {
      const t = inProcessMesh(stories.ctx, hops);
      const session = openSession(stories.ctx, t.provider, greedy());
      const { ids, done } = await collect(session);
      expect(ids).toEqual(STORIES_GOLDEN);
      expect(done).toMatchObject({ type: 'done', finishReason: 'length', usage: { promptTokens: 1, completionTokens: 32 } });
      expect(session.telemetry.hops.map((h) => [h.range.start, h.range.end])).toHaveLength(hops);
      expect(session.telemetry.outcome).toBe('finished');
      await session.closed; // the hops are released in the background
      expect(t.provider.openLeases).toBe(0);
      for (const peer of t.peers.values()) expect(peer.kvEntries).toBe(0);
    });
  }

  it('cache miss: one hop evicted mid-generation is rebuilt alone, tokens unchanged', async () => {
    const t = inProcessMesh(stories.ctx, 3);
    // Without drafts, so every hop serves each position once (speculative-steps.test.ts has the speculative cases).
    const session = openSession(stories.ctx, t.provider, greedy(), undefined, {}, [1], 'off');
    const { ids } = await collect(session, (n) => {
      if (n === 10) t.peers.get('p2')!.evictAll();
    });
    expect(ids).toEqual(STORIES_GOLDEN);
    expect(session.telemetry.repairs).toHaveLength(1);
    expect(session.telemetry.repairs[0]).toMatchObject({ kind: 'cache_miss', hop: 1, peerId: 'p2' });
    // Only p2 recomputed: it served the 11 replayed positions again; p1 and p3 served each position once.
    const served = (id: string) => (t.peers.get(id)!.stats() as { tokensServed: number }).tokensServed;
    const positions = 1 + 31; // the prompt plus every token fed back
    expect(served('p1')).toBe(positions);
    expect(served('p3')).toBe(positions);
    expect(served('p2')).toBe(positions + 10);
  });

  it('peer loss: a hop whose link drops is replaced by another peer, tokens unchanged', async () => {
    const t = inProcessMesh(stories.ctx, 3);
    const session = openSession(stories.ctx, t.provider, greedy());
    const { ids } = await collect(session, async (n) => {
      if (n === 12) await (t.links.get('p3') as InProcessLink).close('peer vanished');
    });
    expect(ids).toEqual(STORIES_GOLDEN);
    const repair = session.telemetry.repairs.find((r) => r.kind === 'replaced');
    expect(repair).toMatchObject({ hop: 2, lostPeerId: 'p3' });
    expect(['p1', 'p2']).toContain(repair!.peerId);
    expect(t.mesh.peers.map((p) => p.id).sort()).toEqual(['p1', 'p2']);
    await session.closed;
    expect(t.provider.openLeases).toBe(0);
    for (const id of ['p1', 'p2']) expect(t.peers.get(id)!.kvEntries).toBe(0);
  });

  it('peer loss with no replacement ends the session with route unavailable', async () => {
    const t = inProcessMesh(stories.ctx, 1);
    const session = openSession(stories.ctx, t.provider, greedy());
    await expect(
      collect(session, async (n) => {
        if (n === 3) await (t.links.get('p1') as InProcessLink).close('gone');
      }),
    ).rejects.toBeInstanceOf(RouteUnavailableError);
    expect(session.telemetry.outcome).toBe('error');
    await session.closed;
    expect(t.provider.openLeases).toBe(0);
  });

  it('cancellation: abort mid-decode sends no further frame and every hop frees its KV', async () => {
    const counting: CountingLink[] = [];
    const t = inProcessMesh(stories.ctx, 3, (_, peer) => {
      const link = new CountingLink(new InProcessLink(peer));
      counting.push(link);
      return link;
    });
    const controller = new AbortController();
    const session = openSession(stories.ctx, t.provider, greedy(), controller.signal);
    let framesAtAbort = 0;
    const frames = () => counting.reduce((sum, link) => sum + link.frames, 0);
    await expect(
      collect(session, (n) => {
        if (n === 5) {
          controller.abort(new Error('client went away'));
          framesAtAbort = frames();
        }
      }),
    ).rejects.toThrow('client went away');
    await session.closed;
    expect(frames()).toBe(framesAtAbort); // no frame after the abort
    expect(session.telemetry.outcome).toBe('cancelled');
    expect(session.telemetry.releases).toHaveLength(3);
    for (const release of session.telemetry.releases) expect(release.freedEntries).toBe(1);
    for (const peer of t.peers.values()) expect(peer.kvEntries).toBe(0);
    expect(t.provider.openLeases).toBe(0);
  });

  it('cleanup: after many finished, failed and cancelled sessions no hop holds KV and no lease is open', async () => {
    const t = inProcessMesh(stories.ctx, 2);
    for (let i = 0; i < 12; i++) {
      const kind = i % 3;
      if (kind === 0) {
        await collect(openSession(stories.ctx, t.provider, greedy(4 + i)));
      } else if (kind === 1) {
        // Fails mid-route: a prompt id outside the vocabulary is refused by the head's embedding.
        await expect(collect(openSession(stories.ctx, t.provider, greedy(), undefined, {}, [1, 9999]))).rejects.toThrow(/outside the vocabulary/);
      } else {
        const controller = new AbortController();
        await expect(collect(openSession(stories.ctx, t.provider, greedy(), controller.signal), (n) => (n === 2 ? controller.abort() : undefined))).rejects.toMatchObject({ name: 'AbortError' });
      }
    }
    // A consumer that stops iterating early also closes the session.
    const early = openSession(stories.ctx, t.provider, greedy());
    for await (const event of early) if (event.type === 'token') break;
    await t.provider.allClosed();
    for (const peer of t.peers.values()) expect(peer.kvEntries).toBe(0);
    expect(t.provider.leases.length).toBeGreaterThan(0);
    expect(t.provider.openLeases).toBe(0);
  });

  it('the close path runs once even when close is called again', async () => {
    const t = inProcessMesh(stories.ctx, 2);
    const session = openSession(stories.ctx, t.provider, greedy(3));
    await collect(session);
    await session.close();
    await session.close('error');
    await session.closed;
    expect(session.telemetry.releases).toHaveLength(2);
    expect(session.telemetry.outcome).toBe('finished');
  });
});

describe('memory budget', () => {
  it("a peer's KV gets what its weights leave: two sessions squeezed into one session's room are rebuilt on cache misses, tokens unchanged", async () => {
    const { getShardArtifact } = await import('../../src/node/artifact-cache.ts');
    const { Mesh } = await import('../../src/core/mesh/mesh.ts');
    const { InProcessLink } = await import('../../src/core/runtime/in-process-link.ts');
    const { meshModel } = await import('../../src/node/mesh-model.ts');
    const { createPeer, CountingProvider } = await import('./route-harness.ts');
    const { artifact } = await getShardArtifact(stories.ctx.model.checkpoint, stories.ctx.model.key, { kind: 'layers', range: { start: 0, end: 5 } }, 'fp32', FP32);
    const kvPerPosition = 5 * 2 * 4 * 8 * 4; // layers × (key, value) × kv heads × head dim × fp32
    const peer = createPeer(stories.ctx, artifact.manifest.weightsLength + 40 * kvPerPosition);
    const mesh = new Mesh(meshModel(stories.ctx.model, 'stories260k', 'fp32', FP32), { headLayers: 'none' });
    mesh.addPeer({ id: 'small', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(peer) });
    const provider = new CountingProvider(mesh);
    const a = openSession(stories.ctx, provider, greedy());
    const b = openSession(stories.ctx, provider, greedy());
    const [ra, rb] = await Promise.all([collect(a), collect(b)]);
    expect(ra.ids).toEqual(STORIES_GOLDEN);
    expect(rb.ids).toEqual(STORIES_GOLDEN);
    const misses = [...a.telemetry.repairs, ...b.telemetry.repairs].filter((r) => r.kind === 'cache_miss');
    expect(misses.length).toBeGreaterThan(0);
    expect((peer.stats() as { kvBudgetBytes: number }).kvBudgetBytes).toBe(40 * kvPerPosition);
    await Promise.all([a.closed, b.closed]);
    expect(peer.kvEntries).toBe(0);
  });
});

describe('a hop that stops answering', () => {
  it('is replaced once its link times out, tokens unchanged', async () => {
    const { LinkTimeoutError } = await import('../../src/core/runtime/peer-link.ts');
    const { InProcessLink } = await import('../../src/core/runtime/in-process-link.ts');
    let frames = 0;
    // p2 answers 8 frames, then hangs: its link gives up as a SocketLink with a timeout would.
    const t = inProcessMesh(stories.ctx, 3, (id, peer) => {
      const inner = new InProcessLink(peer);
      if (id !== 'p2') return inner;
      return Object.assign(Object.create(inner) as InProcessLink, {
        request: async (frame: Uint8Array, signal?: AbortSignal) => {
          if (++frames <= 8) return inner.request(frame, signal);
          await new Promise((resolve) => setTimeout(resolve, 50));
          throw new LinkTimeoutError('frame request', 50);
        },
      });
    });
    const session = openSession(stories.ctx, t.provider, greedy());
    const { ids } = await collect(session);
    expect(ids).toEqual(STORIES_GOLDEN);
    expect(session.telemetry.repairs).toEqual([expect.objectContaining({ kind: 'replaced', hop: 1, lostPeerId: 'p2' })]);
  });
});

describe('the end of a session does not hold up its client', () => {
  it("the done event (the client's [DONE]) arrives while a hop's release is held back; closed resolves once it is let through", async () => {
    const gates: GateLink[] = [];
    const t = inProcessMesh(stories.ctx, 2, (_, peer) => {
      const gate = new GateLink(new InProcessLink(peer));
      gates.push(gate);
      return gate;
    });
    gates[1].holdReleases = true;
    const settled: string[] = [];
    const session = openSession(stories.ctx, t.provider, greedy(12), undefined, { onSettled: (tm) => settled.push(tm.outcome) }, PROMPT);
    const { ids, done } = await collect(session);
    expect(ids).toEqual(await oneProcessTokens(stories.ctx, PROMPT, 12));
    expect(done).toMatchObject({ type: 'done', finishReason: 'length' });
    // The iteration ended (the client was answered) with a release still held.
    await gates[1].releaseHeld.promise;
    expect(settled).toEqual(['finished']);
    expect(session.telemetry).toMatchObject({ outcome: 'finished', finishedAt: expect.any(Number) });
    let closed = false;
    void session.closed.then(() => (closed = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(false);
    expect(t.peers.get('p2')!.kvEntries).toBe(1);
    gates[1].letReleasesThrough();
    await session.closed;
    expect(session.telemetry.releases.map((r) => r.freedEntries).sort()).toEqual([1, 1]);
    for (const peer of t.peers.values()) expect(peer.kvEntries).toBe(0);
  });

  it('abort while a frame is in flight (held at a gate): no frame after the abort, every hop released', async () => {
    const gates: GateLink[] = [];
    const t = inProcessMesh(stories.ctx, 3, (_, peer) => {
      const gate = new GateLink(new InProcessLink(peer));
      gates.push(gate);
      return gate;
    });
    gates[1].open = 5; // the middle hop holds its sixth frame
    const controller = new AbortController();
    const session = openSession(stories.ctx, t.provider, greedy(), controller.signal, {}, PROMPT);
    const running = collect(session).catch((e: unknown) => e);
    await gates[1].held.promise;
    const framesAtAbort = gates.map((g) => g.frames);
    controller.abort(new Error('client went away'));
    expect(session.telemetry.outcome).toBe('cancelled'); // settled synchronously, in the abort
    expect(await running).toMatchObject({ message: 'client went away' });
    await session.closed;
    expect(gates.map((g) => g.frames)).toEqual(framesAtAbort);
    expect(session.telemetry.releases).toHaveLength(3);
    for (const release of session.telemetry.releases) expect(release.freedEntries).toBe(1);
    for (const peer of t.peers.values()) expect(peer.kvEntries).toBe(0);
    expect(t.provider.openLeases).toBe(0);
    gates[1].release();
  });

  it('a cache miss during a replay: the next hop loses its KV while the first is being rebuilt; both rebuilt, tokens unchanged', async () => {
    let faulty!: FaultyPeer;
    const t = inProcessMesh(stories.ctx, 3, (id, peer) => {
      if (id !== 'p1') return new InProcessLink(peer);
      faulty = new FaultyPeer(peer, 'nan', Infinity); // never faulty: only its frame hook is used
      return new InProcessLink(faulty);
    });
    const session = openSession(stories.ctx, t.provider, greedy(16), undefined, {}, PROMPT);
    faulty.onFrame = (bytes) => {
      // p1 receives a replay (a prefill of more than the prompt): p2 loses its KV meanwhile.
      const frame = decodeFrame(bytes);
      if (frame.startPosition === 0 && frame.activations.tokens > PROMPT.length) t.peers.get('p2')!.evictAll();
    };
    const { ids } = await collect(session, (n) => {
      if (n === 6) t.peers.get('p1')!.evictAll();
    });
    expect(ids).toEqual(await oneProcessTokens(stories.ctx, PROMPT, 16));
    expect(session.telemetry.repairs.map((r) => [r.kind, r.peerId])).toEqual([
      ['cache_miss', 'p1'],
      ['cache_miss', 'p2'],
    ]);
    await session.closed;
    for (const peer of t.peers.values()) expect(peer.kvEntries).toBe(0);
  });
});
