/**
 * Chained routes in one process (protocol 3.2), through the Route Session without HTTP, over
 * real ShardPeers behind real ChainForwarders: head → p1 → p2 → p3 → head. Greedy output
 * equals the one-process answer (with prompt-lookup speculation and with pipelined prefill);
 * no star frame is sent while the chain is whole; every hop copies its output to the head.
 * A hop mid-chain that answers NaN, hangs past its deadline or is gone is replaced, the
 * tokens unchanged; a chain frame from a sender the head did not name is refused.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { encodeFrame } from '../../src/core/frames/frame-codec.ts';
import { encodeLaneFrame } from '../../src/core/frames/lane-frame-codec.ts';
import { DEADLINE_FLOOR_MS } from '../../src/core/mesh/hop-latency.ts';
import { HEAD_PEER_ID } from '../../src/core/mesh/plan-route.ts';
import { HopVerifier } from '../../src/core/route/verify-hop.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { createRng } from '../../src/core/sampling/rng.ts';
import { ManualClock } from './manual-clock.ts';
import { FaultyPeer, type PeerFault } from './peer-doubles.ts';
import { chainMesh } from './chain-harness.ts';
import { collect, createPeer, greedy, openSession, PROMPT, useStories } from './route-harness.ts';

const TOKENS = 16;
const stories = useStories('chain-route', TOKENS);

const starFrames = (t: ReturnType<typeof chainMesh>) => [...t.peers.values()].map((p) => p.link.frames);

describe('a chained route gives the one-process answer', () => {
  it('greedy through head → p1 → p2 → p3 → head, speculation on: same tokens, no star frame, every hop copied', async () => {
    const t = chainMesh(stories.ctx, 3);
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { routeMode: 'chain' }, PROMPT);
    const { ids } = await collect(session);
    expect(ids).toEqual(stories.expected);
    expect(session.telemetry.hops.map((h) => h.peerId)).toEqual(['p1', 'p2', 'p3']);
    expect(starFrames(t)).toEqual([0, 0, 0]);
    const steps = session.telemetry.speculation!.steps;
    expect(steps).toBeGreaterThan(1);
    for (const p of t.peers.values()) expect(p.copies).toBe(session.telemetry.hops[0].frames);
    expect(session.telemetry.repairs).toEqual([]);
    await session.closed;
    for (const p of t.peers.values()) {
      expect(p.shard.kvEntries).toBe(0);
      expect(p.forwarder.table.size).toBe(0);
    }
  });

  it('a pipelined prefill flows down the chain chunk by chunk: same tokens', async () => {
    const t = chainMesh(stories.ctx, 3);
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { routeMode: 'chain', prefillChunk: 3 }, PROMPT);
    expect((await collect(session)).ids).toEqual(stories.expected);
    expect(starFrames(t)).toEqual([0, 0, 0]);
    // 9 prompt positions in chunks of 3: three copies of the prefill per hop, then the decode steps.
    expect(session.telemetry.hops[2].frames).toBeGreaterThanOrEqual(3 + 1);
  });

  it('four sessions at once on one chain: each gives the one-process answer, every KV entry freed', async () => {
    const t = chainMesh(stories.ctx, 3);
    const sessions = Array.from({ length: 4 }, () => openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { routeMode: 'chain' }, PROMPT));
    const answers = await Promise.all(sessions.map((s) => collect(s)));
    for (const { ids } of answers) expect(ids).toEqual(stories.expected);
    expect(sessions.flatMap((s) => s.telemetry.repairs)).toEqual([]);
    expect([...t.peers.values()].flatMap((p) => p.reports)).toEqual([]);
    expect(starFrames(t)).toEqual([0, 0, 0]);
    await Promise.all(sessions.map((s) => s.closed));
    for (const p of t.peers.values()) expect([p.shard.kvEntries, p.forwarder.table.size]).toEqual([0, 0]);
  });

  for (const speculate of ['off', 'ngram'] as const) {
    it(`four sessions at once on a batched chain, speculation ${speculate}: steps run batched at every hop, each gives the one-process answer`, async () => {
      const t = chainMesh(stories.ctx, 3, undefined, {}, true);
      const sessions = Array.from({ length: 4 }, () => openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { routeMode: 'chain' }, PROMPT, speculate));
      const answers = await Promise.all(sessions.map((s) => collect(s)));
      for (const { ids } of answers) expect(ids).toEqual(stories.expected);
      expect(sessions.flatMap((s) => s.telemetry.repairs)).toEqual([]);
      expect([...t.peers.values()].flatMap((p) => p.reports)).toEqual([]);
      expect(starFrames(t)).toEqual([0, 0, 0]);
      // Every hop ran some steps of several sessions as one batched run, and copied each session's output (as a lane):
      // one copy frame per shard run at most (protocol 3.4), fewer frames than copies.
      for (const p of t.peers.values()) {
        const stats = p.batching!();
        expect(stats.batches).toBeGreaterThan(0);
        expect(stats.batchedEntries).toBeGreaterThan(stats.batches);
        expect(p.copies).toBe(sessions.reduce((n, s) => n + s.telemetry.hops[0].frames, 0));
        expect(p.copyFrames).toBeLessThanOrEqual(stats.batches + stats.singles + stats.prefills);
        expect(p.copyFrames).toBeLessThan(p.copies);
      }
      // p2 and p3 were handed chain-lanes frames by the hop before them.
      expect([...t.peers.values()].map((p) => p.laneFramesIn > 0)).toEqual([false, true, true]);
      if (speculate === 'ngram') expect(sessions.some((s) => s.telemetry.speculation!.drafted > 0)).toBe(true);
      await Promise.all(sessions.map((s) => s.closed));
      for (const p of t.peers.values()) expect([p.shard.kvEntries, p.forwarder.table.size]).toEqual([0, 0]);
    });
  }

  for (const [old, minor] of [['p2', 2], ['p3', 3]] as const) {
    it(`four sessions on a batched chain where ${old} announced 3.${minor}: no lane frame on that chain (kinds 6 and 7 only), each gives the one-process answer`, async () => {
      const t = chainMesh(stories.ctx, 3, undefined, {}, true, [], { [old]: { major: 3, minor } });
      const sessions = Array.from({ length: 4 }, () => openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { routeMode: 'chain' }, PROMPT));
      const answers = await Promise.all(sessions.map((s) => collect(s)));
      for (const { ids } of answers) expect(ids).toEqual(stories.expected);
      expect(sessions.flatMap((s) => s.telemetry.repairs)).toEqual([]);
      expect(sessions.map((s) => s.telemetry.links)).toEqual(sessions.map(() => ['direct', 'direct']));
      expect(starFrames(t)).toEqual([0, 0, 0]);
      for (const p of t.peers.values()) {
        expect(p.batching!().batchedEntries).toBeGreaterThan(p.batching!().batches); // still batched runs at each hop
        expect([p.laneFramesIn, p.copyFrames]).toEqual([0, p.copies]);
      }
    });
  }

  it('a pipelined prefill on a mixed route (p1 through the head into p2, p2 → p3 chained) flows segment by segment: same tokens', async () => {
    const t = chainMesh(stories.ctx, 3, undefined, {}, false, ['p2']);
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { routeMode: 'chain', prefillChunk: 3 }, PROMPT);
    expect((await collect(session)).ids).toEqual(stories.expected);
    expect(session.telemetry.links).toEqual(['head', 'direct']);
    expect(session.telemetry.repairs).toEqual([]);
    // p1 is a star hop (head → p1 → head), p2 → p3 a chained segment: no star frame to either of them.
    const [p1, p2, p3] = starFrames(t);
    expect(p1).toBeGreaterThan(0);
    expect([p2, p3]).toEqual([0, 0]);
    // 9 prompt positions in chunks of 3: each hop ran three prefill chunks, then the decode steps.
    expect(session.telemetry.hops.map((h) => h.frames)).toEqual([p1, p1, p1]);
    expect(p1).toBeGreaterThanOrEqual(3 + 1);
  });

  it('star mode sends no chain frame and gives the same tokens', async () => {
    const t = chainMesh(stories.ctx, 3);
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { routeMode: 'star' }, PROMPT);
    expect((await collect(session)).ids).toEqual(stories.expected);
    expect([...t.peers.values()].map((p) => p.copies)).toEqual([0, 0, 0]);
    expect(Math.min(...starFrames(t))).toBeGreaterThan(0);
  });
});

describe('a hop mid-chain that fails is replaced, same tokens', () => {
  const faulty = (fault: PeerFault, after: number) => (id: string, peer: import('../../src/core/peer/shard-peer.ts').ShardPeer) => (id === 'p2' ? new FaultyPeer(peer, fault, after) : peer);

  it('p2 answers NaN from its 5th frame: the head sees the bad copy, replaces p2', async () => {
    const t = chainMesh(stories.ctx, 4, faulty('nan', 4));
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { routeMode: 'chain' }, PROMPT);
    expect((await collect(session)).ids).toEqual(stories.expected);
    const replaced = session.telemetry.repairs.filter((r) => r.kind === 'replaced');
    expect(replaced).toEqual([expect.objectContaining({ lostPeerId: 'p2', reason: expect.stringMatching(/^faulty: .*NaN/) })]);
    expect(t.mesh.peers.find((p) => p.id === 'p2')!.quarantine).toMatchObject({ strikes: 1 });
    // The chain is named again around the replacement: later steps are chained again.
    expect(t.peers.get(replaced[0].peerId)!.copies).toBeGreaterThan(0);
  });

  it('p2 hangs: its copy is missing at its deadline (the clock seam), p2 is replaced', async () => {
    const clock = new ManualClock();
    let p2!: FaultyPeer;
    const t = chainMesh(stories.ctx, 4, (id, peer) => (id === 'p2' ? (p2 = new FaultyPeer(peer, 'silent', 6)) : peer), { clock });
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { routeMode: 'chain', clock, hopTimeoutMs: 5000, backoff: { baseMs: 0, maxMs: 0 } }, PROMPT);
    const running = collect(session);
    await p2.tripped.promise;
    await new Promise((r) => setTimeout(r, 20));
    // The adaptive deadline: p2 answered in 0 ms on this clock, so the floor (--hop-timeout, 5 s, is the ceiling).
    expect(clock.nextIn).toBe(DEADLINE_FLOOR_MS);
    clock.advance(DEADLINE_FLOOR_MS);
    expect((await running).ids).toEqual(stories.expected);
    expect(session.telemetry.repairs).toEqual([expect.objectContaining({ kind: 'replaced', lostPeerId: 'p2', cause: 'hung' })]);
  });

  it('p2 is gone (its process killed): p1 cannot forward, reports it, p2 is replaced', async () => {
    const t = chainMesh(stories.ctx, 4);
    let seen = 0;
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, {
      routeMode: 'chain',
      onUpdate: () => {
        if (++seen === 8) {
          t.chains.leave('p2');
          void t.peers.get('p2')!.link.close('killed');
        }
      },
    }, PROMPT);
    expect((await collect(session)).ids).toEqual(stories.expected);
    expect(session.telemetry.repairs).toEqual([expect.objectContaining({ kind: 'replaced', lostPeerId: 'p2', cause: 'lost' })]);
    expect(t.peers.get('p1')!.reports.some((r) => /route_unavailable: could not forward to p2/.test(r))).toBe(true);
  });
});

describe('lanes: repair stays per session', () => {
  it('four sessions on a batched chain, p2 killed mid-stream: p1 cannot forward the lane frame, each lane is reported on its own, every session replaces p2 and gives the one-process answer', async () => {
    const t = chainMesh(stories.ctx, 4, undefined, {}, true);
    let seen = 0;
    const kill = () => {
      if (++seen !== 20) return;
      t.chains.leave('p2');
      void t.peers.get('p2')!.link.close('killed');
    };
    const sessions = Array.from({ length: 4 }, () => openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { routeMode: 'chain', onUpdate: kill }, PROMPT));
    const answers = await Promise.all(sessions.map((s) => collect(s)));
    for (const { ids } of answers) expect(ids).toEqual(stories.expected);
    // p2 carried every session, so each one replaced it — on its own, from its own history.
    for (const s of sessions) expect(s.telemetry.repairs).toEqual([expect.objectContaining({ kind: 'replaced', lostPeerId: 'p2', cause: 'lost' })]);
    const forwards = t.peers.get('p1')!.reports.filter((r) => /route_unavailable: could not forward to p2/.test(r));
    expect(forwards.length).toBeGreaterThan(0);
    expect(t.peers.get('p2')!.laneFramesIn).toBeGreaterThan(0); // lanes flowed before the kill
  });
});

describe('chain frames only from the sender the head named', () => {
  it('a frame from a peer the head did not name for that session is refused and reported', async () => {
    const t = chainMesh(stories.ctx, 3);
    const p3 = t.peers.get('p3')!;
    const m = t.mesh.model;
    const range = { start: 4, end: 5 };
    expect(await p3.forwarder.handleControl({ kind: 'assign', modelKey: m.modelKey, model: m.name, range, dtype: m.artifacts.dtype, weights: m.artifacts.weights, artifactUrl: m.artifacts.url(range), config: m.config })).toMatchObject({ kind: 'ready' });
    const sessionId = randomUUID();
    expect(await p3.forwarder.handleControl({ kind: 'chain', sessionId, range: { start: 4, end: 5 }, from: 'p2' })).toMatchObject({ kind: 'chained' });
    const frame = () => encodeFrame({ kind: 'chain', requestId: 7, sessionId, startPosition: 0, range: { start: 4, end: 5 }, activations: { dtype: 'fp32', data: new Float32Array(64), tokens: 1, hiddenSize: 64 } });
    await p3.forwarder.receiveChain(frame(), 'p1');
    await p3.forwarder.receiveChain(frame(), 'head');
    await p3.forwarder.receiveChain(encodeFrame({ kind: 'chain', requestId: 8, sessionId: randomUUID(), startPosition: 0, range: { start: 4, end: 5 }, activations: { dtype: 'fp32', data: new Float32Array(64), tokens: 1, hiddenSize: 64 } }), 'p2');
    expect(p3.reports).toEqual([
      expect.stringMatching(/^unauthorized: .*came from p1; the head named p2/),
      expect.stringMatching(/^unauthorized: .*came from head; the head named p2/),
      expect.stringMatching(/^unauthorized: no chained route/),
    ]);
    expect(p3.copies).toBe(0);
    expect(p3.shard.kvEntries).toBe(0);
    await p3.forwarder.receiveChain(frame(), 'p2');
    expect(p3.copies).toBe(1);
  });

  it('chain-lanes frames (3.4): a lane for a session the sender was not named for, a NaN lane — refused and reported lane by lane, the others run; duplicate lanes, count and length mismatches — the frame refused, typed, nothing run', async () => {
    const t = chainMesh(stories.ctx, 3);
    const p3 = t.peers.get('p3')!;
    const m = t.mesh.model;
    const range = { start: 4, end: 5 };
    expect(await p3.forwarder.handleControl({ kind: 'assign', modelKey: m.modelKey, model: m.name, range, dtype: m.artifacts.dtype, weights: m.artifacts.weights, artifactUrl: m.artifacts.url(range), config: m.config })).toMatchObject({ kind: 'ready' });
    const [a, b, c, d] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    for (const sessionId of [a, c]) expect(await p3.forwarder.handleControl({ kind: 'chain', sessionId, range, from: 'p2', lanes: true })).toMatchObject({ kind: 'chained' });
    expect(await p3.forwarder.handleControl({ kind: 'chain', sessionId: d, range, from: 'p1', lanes: true })).toMatchObject({ kind: 'chained' });
    const hidden = (value = 0.5) => ({ dtype: 'fp32' as const, data: new Float32Array(64).fill(value), tokens: 1, hiddenSize: 64 });
    const lanes = (...ids: string[]) => encodeLaneFrame({ kind: 'chain-lanes', range, dtype: 'fp32', hiddenSize: 64, lanes: ids.map((sessionId, i) => ({ sessionId, requestId: 10 + i, startPosition: 0, activations: hidden() })) });
    const settle = () => new Promise((r) => setTimeout(r, 20));

    // Whole-frame refusals: a session in two lanes, a lane count or a body length that does not match.
    const twice = lanes(a, c);
    twice.set(twice.subarray(48, 64), 48 + 32); // lane 1's session id := lane 0's
    const counted = lanes(a, c);
    new DataView(counted.buffer).setUint32(28, 3, true);
    const short = lanes(a, c).subarray(0, -4);
    const withD = lanes(a, d); // d is p1's: named lanes are only a's
    new DataView(withD.buffer).setUint32(48 + 32 + 24, 2, true); // lane 1 claims 2 tokens
    for (const frame of [twice, counted, short, withD]) await p3.forwarder.receiveChain(frame, 'p2');
    await settle();
    // Each is reported once for every session it named that p2 may send for (a, c), and for no other.
    expect(p3.reports).toEqual([
      expect.stringMatching(/^bad_frame: lane frame: session .* appears in two lanes/),
      ...Array(2).fill(expect.stringMatching(/^wrong_payload_size: lane frame: lane 1 body of 256 bytes runs past the frame/)),
      ...Array(2).fill(expect.stringMatching(/^wrong_payload_size: lane frame: payload length 576 but 572 bytes/)),
      expect.stringMatching(/^wrong_payload_size: lane frame: lane 1 body of 256 bytes ≠ 2 × 64 × 4/),
    ]);
    expect([p3.copies, p3.shard.kvEntries]).toEqual([0, 0]);

    // Lane by lane: b (no route here), d (named from p1) and a NaN lane for c are refused; a runs.
    p3.reports.length = 0;
    const mixed = encodeLaneFrame({ kind: 'chain-lanes', range, dtype: 'fp32', hiddenSize: 64, lanes: [
      { sessionId: a, requestId: 1, startPosition: 0, activations: hidden() },
      { sessionId: b, requestId: 2, startPosition: 0, activations: hidden() },
      { sessionId: c, requestId: 3, startPosition: 0, activations: hidden(Number.NaN) },
      { sessionId: d, requestId: 4, startPosition: 0, activations: hidden() },
    ] });
    await p3.forwarder.receiveChain(mixed, 'p2');
    await settle();
    expect(p3.reports.sort()).toEqual([
      expect.stringMatching(/^nan_activations: /),
      expect.stringMatching(/^unauthorized: .*came from p2; the head named p1/),
      expect.stringMatching(/^unauthorized: no chained route for session/),
    ].sort((x, y) => String(x).localeCompare(String(y))));
    expect([p3.copies, p3.shard.kvEntries]).toEqual([1, 1]); // a's lane only
    // c was not touched: its next lane runs from position 0.
    await p3.forwarder.receiveChain(lanes(c), 'p2');
    await settle();
    expect([p3.copies, p3.shard.kvEntries]).toEqual([2, 2]);
  });

  it('a peer will not be named its own sender, nor forward to itself or the head', async () => {
    const t = chainMesh(stories.ctx, 2);
    const f = t.peers.get('p1')!.forwarder;
    const sessionId = randomUUID();
    const range = { start: 0, end: 2 };
    expect(await f.handleControl({ kind: 'chain', sessionId, range, from: 'p1' })).toMatchObject({ kind: 'error', code: 'protocol_error' });
    expect(await f.handleControl({ kind: 'chain', sessionId, range, from: 'head', to: { peerId: 'p1', range } })).toMatchObject({ kind: 'error', code: 'protocol_error' });
    expect(await f.handleControl({ kind: 'chain', sessionId, range, from: 'head', to: { peerId: 'head', range } })).toMatchObject({ kind: 'error', code: 'protocol_error' });
    expect(await f.handleControl({ kind: 'chain', sessionId, range, from: 'head', to: { peerId: 'p9', range } })).toMatchObject({ kind: 'error', code: 'route_unavailable' });
    expect(f.table.size).toBe(0);
  });
});

describe('--verify on a chain', () => {
  it('p2 echoes its input (finite, wrong) from its 3rd frame: its copy fails the check, p2 is replaced (mismatch), the tokens are exact', async () => {
    let echo!: FaultyPeer;
    const t = chainMesh(stories.ctx, 4, (id, peer) => (id === 'p2' ? (echo = new FaultyPeer(peer, 'echo', 2)) : peer));
    // The head as a witness that is never planned.
    t.mesh.addPeer({ id: HEAD_PEER_ID, runtime: 'head', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(createPeer(stories.ctx)) });
    const verifier = new HopVerifier({ fraction: 1, source: t.mesh, rng: createRng(7) });
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { routeMode: 'chain', verifier }, PROMPT);
    expect((await collect(session)).ids).toEqual(stories.expected);
    expect(echo.faulted).toBe(1);
    expect(session.telemetry.repairs).toEqual([expect.objectContaining({ kind: 'replaced', cause: 'mismatch', lostPeerId: 'p2' })]);
    expect(t.peers.get('p2')!.copies).toBe(3); // two good copies, then the echo
  });
});
