/**
 * Batched decode across sessions, below the Route Session: eight sessions with different
 * prompt lengths, sampling settings and seeds run together over in-process and socket
 * links, their decode steps folded into batched frames by each peer link's BatchingLink,
 * and each gives exactly the tokens it gives alone. Then, in one batched run: one session is
 * cancelled mid-batch, one hits a cache miss (its KV evicted on one peer), one loses the
 * peer of its second hop — the others are unaffected. Gated links make the first batch
 * certain; triggers are token counts, not sleeps.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import type { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { BatchingHeadRunner } from '../../src/core/runtime/batching-head.ts';
import { RouteSession } from '../../src/core/route/route-session.ts';
import type { HeadRunner } from '../../src/core/runtime/ort-head-runner.ts';
import type { HopLease, RouteProvider } from '../../src/core/mesh/route-provider.ts';
import { BatchingLink } from '../../src/core/mesh/batching-link.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { LeasedLink } from '../../src/core/mesh/leased-link.ts';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';
import { SocketLink } from '../../src/core/runtime/socket-link.ts';
import { validateSamplingParams, type SamplingParams } from '../../src/core/sampling/index.ts';
import type { AssignMessage } from '../../src/shared/control.ts';
import { dialSocket } from '../../src/node/net/ws-dial.ts';
import { startDirectPeerServer, type DirectPeerServer } from '../transport/transport-harness.ts';
import { GateLink } from './peer-doubles.ts';
import { collect, createPeer, inProcessMesh, type TestMesh, useStories } from './route-harness.ts';

const MAX_TOKENS = 20;

interface Spec {
  readonly prompt: number[];
  readonly params: SamplingParams;
}

/** Eight sessions: prompts of 1 to 15 tokens, greedy and sampled with their own seeds and settings. */
const SPECS: Spec[] = Array.from({ length: 8 }, (_, i) => ({
  prompt: [1, ...Array.from({ length: i * 2 }, (_, j) => 3 + ((i * 37 + j * 11) % 500))],
  params:
    i % 2 === 0
      ? validateSamplingParams({ temperature: 0, maxTokens: MAX_TOKENS })
      : validateSamplingParams({ temperature: 0.7 + i / 20, topP: 0.95, topK: 40 + i, seed: 1000 + i, maxTokens: MAX_TOKENS }),
}));

const stories = useStories('batching');
const servers: DirectPeerServer[] = [];
// Runs before useStories' own clean-up (after-hooks run last registered first).
afterAll(async () => {
  for (const s of servers) await s.close();
});

function session(provider: RouteProvider, spec: Spec, signal?: AbortSignal, head: HeadRunner = stories.ctx.head): RouteSession {
  return new RouteSession(
    { head, route: provider, vocabSize: stories.ctx.model.checkpoint.config.vocabSize, policy: { backoff: { baseMs: 1, maxMs: 5 } } },
    { sessionId: randomUUID(), promptIds: spec.prompt, params: spec.params },
    signal,
  );
}

async function alone(provider: RouteProvider): Promise<number[][]> {
  const out: number[][] = [];
  for (const spec of SPECS) out.push((await collect(session(provider, spec))).ids);
  return out;
}

async function socketLink(peer: ShardPeer): Promise<PeerLink> {
  const server = await startDirectPeerServer(peer);
  servers.push(server);
  const dialed = await dialSocket(server.url);
  const link = new SocketLink(dialed.socket, { timeoutMs: 30_000 });
  dialed.attach(link);
  return link;
}

/** The BatchingLink the mesh put over each peer's link, and what it sent. */
function batchingStats(m: TestMesh) {
  return m.mesh.peers.map((p) => (p.link as BatchingLink).stats);
}

describe('batched decode', () => {
  for (const transport of ['in-process', 'socket'] as const) {
    it(`eight sessions together over ${transport} links give exactly the tokens each gives alone`, async () => {
      const gates = new Map<string, GateLink>();
      const links = new Map<string, PeerLink>();
      const peers = [createPeer(stories.ctx), createPeer(stories.ctx)];
      for (const [i, peer] of peers.entries()) links.set(`p${i + 1}`, transport === 'socket' ? await socketLink(peer) : new InProcessLink(peer));
      const m = inProcessMesh(stories.ctx, 2, (id) => {
        const gate = new GateLink(links.get(id)!);
        gates.set(id, gate);
        return gate;
      });
      // The mesh's links lead to `peers` (inProcessMesh's own peers stay idle).
      const expected = await alone(m.provider);
      expect(batchingStats(m).every((s) => s.batches === 0)).toBe(true);

      // Hold the first hop's frames until all eight sessions are under way: the steps that
      // arrive meanwhile leave together.
      const gate = gates.get('p1')!;
      gate.hold(0);
      // The LM head batched too (as the head node does): concurrent sessions' logits in one run.
      const head = new BatchingHeadRunner(stories.ctx.head);
      const runs = SPECS.map((spec) => collect(session(m.provider, spec, undefined, head)));
      await gate.held.promise;
      await new Promise((r) => setImmediate(r));
      gate.release();
      const together = (await Promise.all(runs)).map((r) => r.ids);
      expect(together).toEqual(expected);
      const stats = batchingStats(m);
      expect(stats.reduce((n, s) => n + s.batchedEntries, 0)).toBeGreaterThan(8);
      expect(head.stats.batchedRows).toBeGreaterThan(8);
      for (const peer of peers) {
        const served = peer.stats();
        expect(served.kind === 'stats' && served.batchFrames).toBeGreaterThan(0);
      }
      await m.provider.allClosed();
      for (const peer of peers) expect(peer.kvEntries).toBe(0);
      for (const peer of peers) await peer.dispose();
    }, 120_000);
  }

  it('a session cancelled mid-batch, one hitting a cache miss and one losing a peer leave the others unaffected', async () => {
    const m = inProcessMesh(stories.ctx, 2);
    const expected = await alone(m.provider);
    const [hopA, hopB] = (await m.mesh.route()).map((l) => (void l.link.close(), { peerId: l.peerId, range: l.range }));
    expect(hopA.peerId).toBe('p1');

    // A spare peer holding the second hop's range, reached only by session 6's route.
    const spare = createPeer(stories.ctx);
    const ready = await spare.handleControl({ kind: 'assign', id: 'a', modelKey: stories.ctx.model.key, model: 'stories260k', range: hopB.range, dtype: 'fp32', artifactUrl: '', config: {} } as unknown as AssignMessage);
    expect(ready.kind).toBe('ready');
    const spareLink = new InProcessLink(spare);
    const viaSpare: RouteProvider = {
      route: async (signal) => {
        const hops = await m.provider.route(signal);
        void hops[1].link.close();
        const lease: HopLease = { peerId: 'spare', range: hopB.range, link: new LeasedLink(spareLink) };
        return [hops[0], lease];
      },
      replace: (range, banned, signal) => m.provider.replace(range, banned, signal),
    };

    const cancel = new AbortController();
    const sessions = SPECS.map((spec, i) => session(i === 6 ? viaSpare : m.provider, spec, i === 2 ? cancel.signal : undefined));
    const p1 = m.peers.get('p1')!;
    const runs = sessions.map((s, i) =>
      collect(s, (count) => {
        if (i === 2 && count === 4) cancel.abort(new DOMException('client went away', 'AbortError'));
        if (i === 4 && count === 6) expect(p1.evictSession(s.sessionId)).toBe(1);
        if (i === 6 && count === 5) void spareLink.close('the spare peer vanished');
      }).then(
        (r) => ({ ids: r.ids, error: undefined as unknown }),
        (error: unknown) => ({ ids: [] as number[], error }),
      ),
    );
    const results = await Promise.all(runs);
    expect(sessions[2].telemetry.outcome).toBe('cancelled');
    expect((results[2].error as Error).name).toBe('AbortError');
    for (const [i, r] of results.entries()) if (i !== 2) expect(r.ids, `session ${i}`).toEqual(expected[i]);
    expect(sessions[4].telemetry.repairs.map((r) => r.kind)).toEqual(['cache_miss']);
    expect(sessions[6].telemetry.repairs.map((r) => [r.kind, r.lostPeerId])).toEqual([['replaced', 'spare']]);
    for (const [i, s] of sessions.entries()) if (i !== 4 && i !== 6) expect(s.telemetry.repairs, `session ${i}`).toEqual([]);
    expect(batchingStats(m)[0].batchedEntries).toBeGreaterThan(0);
    await m.provider.allClosed();
    await spare.dispose();
  }, 120_000);
});
