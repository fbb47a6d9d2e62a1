/**
 * Peers hold what the route needs, not every range they were ever given. The peer: `unload`
 * frees a range's executor and KV, gives its weights back to the KV budget, waits for a step
 * running on it, and refuses frames for it from then on. The mesh: after failovers and peers
 * coming and going, ranges that neither plan uses and no session leases are unloaded once the
 * grace period passes (the clock seam), a leased range only after its session closed, and a
 * peer that does not know `unload` keeps its ranges counted. Real ShardPeers, stories260k.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';
import type { ShardExecutor } from '../../src/core/runtime/shard-executor.ts';
import type { ControlMessage, StatsMessage } from '../../src/shared/control.ts';
import { localShardLoader } from '../../src/node/local-shard-loader.ts';
import { frameFor, storiesAssign, testActivations } from '../suites/peer-link.suite.ts';
import { ManualClock } from '../route/manual-clock.ts';
import { deferred } from '../route/peer-doubles.ts';
import { collect, greedy, inProcessMesh, openSession, PROMPT, useStories } from '../route/route-harness.ts';

const stories = useStories('unload', 12);

const text = (ranges: readonly { start: number; end: number }[]) => ranges.map((r) => `[${r.start},${r.end})`).sort().join(' ');
const stats = async (peer: ShardPeer) => (await peer.handleControl({ kind: 'stats', kvEntries: 0, kvBytes: 0, kvBudgetBytes: 0, tokensServed: 0, framesServed: 0 })) as StatsMessage;

describe('a peer unloads a range', () => {
  it('frees its executor and KV, gives the weights back to the KV budget, refuses frames for it', async () => {
    const budget = 1 << 30;
    const loaded: ShardExecutor[] = [];
    const inner = localShardLoader(stories.ctx.model, { device: 'cpu', threads: 1 });
    const peer = new ShardPeer({ loader: { load: async (a) => (loaded.push(await inner.load(a)), loaded.at(-1)!) }, memoryBudgetBytes: budget });
    const small = { start: 0, end: 2 };
    const wide = { start: 0, end: 3 };
    expect(await peer.handleControl({ ...storiesAssign(stories.ctx.model, small), id: 'a1' })).toMatchObject({ kind: 'ready' });
    expect(await peer.handleControl({ ...storiesAssign(stories.ctx.model, wide), id: 'a2' })).toMatchObject({ kind: 'ready' });
    const [smallWeights, wideWeights] = loaded.map((e) => e.loaded.weightsBytes);
    expect((await stats(peer)).kvBudgetBytes).toBe(budget - smallWeights - wideWeights);
    const hidden = stories.ctx.model.checkpoint.config.hiddenSize;
    const session = randomUUID();
    for (const range of [small, wide]) expect('frame' in (await peer.handleFrame(frameFor({ requestId: 1, sessionId: session, startPosition: 0, activations: testActivations(hidden, 2, 1), range })))).toBe(true);
    expect(peer.kvEntries).toBe(2);

    const answer = await peer.handleControl({ kind: 'unload', id: 'u1', modelKey: stories.ctx.model.key, range: small });
    expect(answer).toEqual({ kind: 'unloaded', id: 'u1', range: small, loaded: true, freedEntries: 1 });
    expect(text(peer.ranges)).toBe('[0,3)');
    expect(peer.kvEntries).toBe(1);
    expect((await stats(peer)).kvBudgetBytes, 'only what is loaded counts against the budget').toBe(budget - wideWeights);
    const refused = await peer.handleFrame(frameFor({ requestId: 2, sessionId: randomUUID(), startPosition: 0, activations: testActivations(hidden, 1, 2), range: small }));
    expect(refused).toMatchObject({ error: { code: 'not_ready' } });
    expect(await peer.handleControl({ kind: 'unload', id: 'u2', modelKey: stories.ctx.model.key, range: small })).toMatchObject({ kind: 'unloaded', loaded: false, freedEntries: 0 });
    expect('frame' in (await peer.handleFrame(frameFor({ requestId: 3, sessionId: session, startPosition: 2, activations: testActivations(hidden, 1, 3), range: wide })))).toBe(true);
    await peer.dispose();
  });

  it('waits for a step running on the range before it frees it', async () => {
    const gate = deferred();
    const entered = deferred();
    const inner = localShardLoader(stories.ctx.model, { device: 'cpu', threads: 1 });
    let disposed = false;
    const peer = new ShardPeer({
      loader: {
        async load(assign) {
          const executor = await inner.load(assign);
          return Object.assign(Object.create(executor) as ShardExecutor, {
            run: async (...args: Parameters<ShardExecutor['run']>) => (entered.resolve(), await gate.promise, executor.run(...args)),
            dispose: async () => ((disposed = true), executor.dispose()),
          });
        },
      },
      memoryBudgetBytes: 1 << 30,
    });
    const range = { start: 0, end: 2 };
    await peer.handleControl(storiesAssign(stories.ctx.model, range));
    const step = peer.handleFrame(frameFor({ requestId: 1, sessionId: randomUUID(), startPosition: 0, activations: testActivations(stories.ctx.model.checkpoint.config.hiddenSize, 2, 4), range }));
    await entered.promise;
    const unloading = peer.handleControl({ kind: 'unload', id: 'u', modelKey: stories.ctx.model.key, range });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(disposed).toBe(false);
    gate.resolve();
    expect('frame' in (await step)).toBe(true);
    expect(await unloading).toMatchObject({ kind: 'unloaded', loaded: true, freedEntries: 1 });
    expect(disposed).toBe(true);
  });
});

/** A link that answers `unload` as a 2.0 peer does (an unknown kind), counting them. */
class OldPeerLink implements PeerLink {
  unloads = 0;
  constructor(private readonly inner: PeerLink) {}
  get closed() {
    return this.inner.closed;
  }
  request(frame: Uint8Array, signal?: AbortSignal) {
    return this.inner.request(frame, signal);
  }
  async control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    if (message.kind !== 'unload') return this.inner.control(message, signal);
    this.unloads++;
    throw Object.assign(new Error("unknown control message kind 'unload'"), { code: 'unknown_kind' });
  }
  close(reason?: string) {
    return this.inner.close(reason);
  }
}

describe('the mesh unloads ranges no plan uses', () => {
  it('peers leaving and joining: stale ranges go after the grace period, the plan\'s stay, a leased one only after its session', async () => {
    const clock = new ManualClock();
    const t = inProcessMesh(stories.ctx, 3, undefined, { clock, unloadGraceMs: 5000 });
    const run = async () => {
      const session = openSession(stories.ctx, t.provider, greedy(12), undefined, { clock }, PROMPT);
      expect((await collect(session)).ids).toEqual(stories.expected);
      await session.closed;
    };
    const settle = async (ms: number) => {
      clock.advance(ms);
      await new Promise((resolve) => setTimeout(resolve, 50)); // the unloads' round trips
    };
    const holds = (id: string) => text((id === 'p4' ? spare : t.peers.get(id)!).ranges);
    const planned = () => Object.fromEntries(t.mesh.plan().hops.map((h) => [h.peerId, `[${h.range.start},${h.range.end})`]));
    await run(); // p1 [0,2) p2 [2,4) p3 [4,5)
    t.mesh.removePeer('p3');
    await run(); // p1 [0,3) p2 [3,5), loaded beside the old ranges
    expect([holds('p1'), holds('p2')]).toEqual(['[0,2) [0,3)', '[2,4) [3,5)']);
    // A session on the two-peer route, held open (one token out) while a third peer joins.
    const held = openSession(stories.ctx, t.provider, greedy(12), undefined, { clock }, PROMPT);
    const iterator = held[Symbol.asyncIterator]();
    await iterator.next();
    const spare = new ShardPeer({ loader: localShardLoader(stories.ctx.model, { device: 'cpu', threads: 1 }), memoryBudgetBytes: 1 << 30 });
    t.mesh.addPeer({ id: 'p4', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(spare) });
    expect(planned()).toEqual({ p1: '[0,2)', p2: '[2,4)', p4: '[4,5)' });
    await run(); // loads p4 [4,5)
    await settle(5000);
    // [0,3) and [3,5) are no plan's, but the held session leases them: they stay.
    expect([holds('p1'), holds('p2'), holds('p4')]).toEqual(['[0,2) [0,3)', '[2,4) [3,5)', '[4,5)']);
    while (!(await iterator.next()).done);
    await held.closed;
    await settle(4999);
    expect(holds('p1')).toBe('[0,2) [0,3)');
    await settle(1);
    expect([holds('p1'), holds('p2'), holds('p4')]).toEqual(['[0,2)', '[2,4)', '[4,5)']);
    for (const id of ['p1', 'p2', 'p4']) expect(text(t.mesh.peers.find((p) => p.id === id)!.ranges), `${id}: the mesh agrees`).toBe(holds(id));
    await run(); // and the route still serves
    await spare.dispose();
  });

  it('under steady traffic (a session closing every second) a stale range still goes after the grace period, a range in use does not', async () => {
    const clock = new ManualClock();
    const t = inProcessMesh(stories.ctx, 2, undefined, { clock, unloadGraceMs: 5000 });
    const run = async () => {
      const session = openSession(stories.ctx, t.provider, greedy(4), undefined, { clock }, PROMPT);
      expect((await collect(session)).ids).toEqual(stories.expected.slice(0, 4));
      await session.closed;
    };
    const second = async () => {
      clock.advance(1000);
      await new Promise((resolve) => setTimeout(resolve, 20)); // the unloads' round trips
      await run();
    };
    await run();
    const first = text(t.peers.get('p1')!.ranges);
    t.mesh.removePeer('p2');
    await run(); // p1 now serves [0,5), beside its first range
    expect(text(t.peers.get('p1')!.ranges)).toBe(`${first} [0,5)`.split(' ').sort().join(' '));
    for (let s = 0; s < 4; s++) await second();
    expect(text(t.peers.get('p1')!.ranges), '4 s: still within the grace period').toContain(first);
    for (let s = 0; s < 4; s++) await second();
    expect(text(t.peers.get('p1')!.ranges), 'the stale range went while sessions kept closing').toBe('[0,5)');
    expect(text(t.mesh.peers.find((p) => p.id === 'p1')!.ranges)).toBe('[0,5)');
  });

  it('a peer that does not know unload keeps its ranges counted, and is asked once', async () => {
    const clock = new ManualClock();
    let old!: OldPeerLink;
    const t = inProcessMesh(stories.ctx, 2, (id, peer) => (id === 'p1' ? (old = new OldPeerLink(new InProcessLink(peer))) : new InProcessLink(peer)), { clock, unloadGraceMs: 5000 });
    await t.mesh.prepare();
    t.mesh.removePeer('p2'); // p1 now needs [0, 5); its old range is stale
    await t.mesh.prepare();
    clock.advance(5000);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(old.unloads).toBe(1);
    const p1 = t.mesh.peers.find((p) => p.id === 'p1')!;
    expect(p1.ranges.length, 'the refused range still counts as loaded').toBe(2);
    expect(text(t.peers.get('p1')!.ranges)).toBe(text(p1.ranges));
    clock.advance(5000);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(old.unloads).toBe(1);
  });
});
