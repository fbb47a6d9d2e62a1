import { describe, expect, it } from 'vitest';
import {
  FINISHED_SESSIONS_CAP,
  GONE_PEER_TTL_MS,
  RATE_POINTS_CAP,
  applyEvent,
  emptyState,
  type MeshEvent,
  type MeshState,
  type PeerView,
  type SessionView,
} from '../../src/shared/dashboard-state.ts';
import { parseMeshEvent } from '../../src/shared/dashboard-events.ts';

const peer = (id: string, extra: Partial<PeerView> = {}): PeerView => ({
  id,
  runtime: 'node',
  executionProvider: 'cpu',
  layers: [],
  memoryBudgetBytes: 1 << 30,
  kvBytes: 0,
  kvEntries: 0,
  status: 'joining',
  lastHeartbeatAt: 1000,
  tokensServed: 0,
  ...extra,
});

const session = (id: string, extra: Partial<SessionView> = {}): SessionView => ({
  id,
  model: 'demo',
  promptTokens: 5,
  completionTokens: 0,
  startedAt: 2000,
  tokensPerSecond: 0,
  rate: [],
  hops: [{ peerId: 'a', range: { start: 0, end: 3 }, frames: 0, tokens: 0, lastMs: 0, meanMs: 0, kvPositions: 0 }],
  repairs: [],
  state: 'running',
  ...extra,
});

const fold = (events: MeshEvent[], from: MeshState = emptyState({ id: 'demo', numLayers: 5, dtype: 'fp32' }, 1)) =>
  events.reduce(applyEvent, from);

/** Freeze every object reachable from `value`, so any mutation throws (ESM is strict). */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

describe('applyEvent: peers and route', () => {
  it('adds joining peers, updates them, marks leavers gone and keeps them visible', () => {
    const state = fold([
      { kind: 'peer.joined', peer: peer('a') },
      { kind: 'peer.joined', peer: peer('b', { runtime: 'browser', executionProvider: 'webgpu' }) },
      { kind: 'peer.updated', peer: peer('a', { status: 'ready', layers: [{ start: 0, end: 3 }], kvBytes: 4096 }) },
      { kind: 'peer.left', peerId: 'b' },
    ]);
    expect(state.peers.map((p) => [p.id, p.status])).toEqual([
      ['a', 'ready'],
      ['b', 'gone'],
    ]);
    expect(state.peers[0]!.kvBytes).toBe(4096);
    expect(state.peers[1]!.executionProvider).toBe('webgpu'); // the rest of a gone peer stays
  });

  it('a leaver is gone at once with no layers and no KV, stamped with when it left; peer.removed drops only a gone peer', () => {
    const state = fold([
      { kind: 'peer.joined', peer: peer('a') },
      { kind: 'peer.updated', peer: peer('a', { status: 'ready', layers: [{ start: 0, end: 3 }], kvBytes: 4096, kvEntries: 3, weightBytes: 1 << 20, prefixBytes: 2048, prefixEntries: 1 }) },
      { kind: 'peer.joined', peer: peer('b') },
      { kind: 'peer.left', peerId: 'a', at: 1234 },
    ]);
    expect(state.peers.find((p) => p.id === 'a')).toMatchObject({ status: 'gone', layers: [], kvBytes: 0, kvEntries: 0, goneAt: 1234 });
    for (const held of ['weightBytes', 'prefixBytes', 'prefixEntries']) expect(state.peers.find((p) => p.id === 'a'), `a gone peer has no ${held}`).not.toHaveProperty(held);
    const dropped = applyEvent(state, { kind: 'peer.removed', peerId: 'a' });
    expect(dropped.peers.map((p) => p.id)).toEqual(['b']);
    expect(applyEvent(dropped, { kind: 'peer.removed', peerId: 'b' }), 'a peer that is up is not dropped').toBe(dropped);
    expect(parseMeshEvent('peer.left', { peerId: 'a', at: 99 })).toEqual({ kind: 'peer.left', peerId: 'a', at: 99 });
    expect(parseMeshEvent('peer.removed', { peerId: 'a' })).toEqual({ kind: 'peer.removed', peerId: 'a' });
    expect(GONE_PEER_TTL_MS).toBe(60_000);
  });

  it('a gone peer is not revived by an update, but a new join replaces it', () => {
    const gone = fold([{ kind: 'peer.joined', peer: peer('a') }, { kind: 'peer.left', peerId: 'a' }]);
    expect(applyEvent(gone, { kind: 'peer.updated', peer: peer('a', { status: 'ready' }) })).toBe(gone);
    expect(applyEvent(gone, { kind: 'peer.left', peerId: 'a' })).toBe(gone);
    const back = applyEvent(gone, { kind: 'peer.joined', peer: peer('a') });
    expect(back.peers.map((p) => [p.id, p.status])).toEqual([['a', 'joining']]);
  });

  it('a peer that joins again after it was gone counts a rejoin, kept through its updates', () => {
    const once = fold([{ kind: 'peer.joined', peer: peer('a') }, { kind: 'peer.left', peerId: 'a' }, { kind: 'peer.joined', peer: peer('a') }]);
    expect(once.peers[0]!.rejoins).toBe(1);
    const updated = fold([{ kind: 'peer.updated', peer: peer('a', { status: 'ready' }) }, { kind: 'peer.left', peerId: 'a' }, { kind: 'peer.joined', peer: peer('a') }], once);
    expect(updated.peers.map((p) => [p.id, p.status, p.rejoins])).toEqual([['a', 'joining', 2]]);
    expect(fold([{ kind: 'peer.joined', peer: peer('b') }]).peers[0]!.rejoins, 'a first join is no rejoin').toBeUndefined();
    expect(parseMeshEvent('peer.joined', { peer: { ...peer('a'), rejoins: 'x' } }), 'a wrong rejoin count is refused').toBeUndefined();
  });

  it('a peer that says it rejoined (3.5 hello.rejoin) shows rejoined on a head that never saw it; the larger count wins', () => {
    const fresh = fold([{ kind: 'peer.joined', peer: peer('a', { rejoins: 2 }) }]);
    expect(fresh.peers[0]!.rejoins).toBe(2);
    const updated = fold([{ kind: 'peer.updated', peer: peer('a', { status: 'ready' }) }], fresh);
    expect(updated.peers[0]!.rejoins, 'an update without the count keeps it').toBe(2);
    const again = fold([{ kind: 'peer.left', peerId: 'a' }, { kind: 'peer.joined', peer: peer('a', { rejoins: 1 }) }], fresh);
    expect(again.peers[0]!.rejoins, 'seen gone here: one more than before').toBe(3);
    const ahead = fold([{ kind: 'peer.left', peerId: 'a' }, { kind: 'peer.joined', peer: peer('a', { rejoins: 7 }) }], fresh);
    expect(ahead.peers[0]!.rejoins, "the peer's own count when larger").toBe(7);
  });

  it('ignores updates and departures of unknown peers', () => {
    const state = fold([{ kind: 'peer.joined', peer: peer('a') }]);
    expect(applyEvent(state, { kind: 'peer.updated', peer: peer('zz') })).toBe(state);
    expect(applyEvent(state, { kind: 'peer.left', peerId: 'zz' })).toBe(state);
  });

  it('replaces the route', () => {
    const route = { hops: [{ peerId: 'a', range: { start: 0, end: 3 } }, { peerId: 'head', range: { start: 3, end: 5 } }] };
    const state = fold([{ kind: 'route.changed', route }]);
    expect(state.route).toEqual(route);
    expect(fold([{ kind: 'route.changed', route: { hops: [], reason: 'no peers' } }], state).route.reason).toBe('no peers');
  });
});

describe('applyEvent: sessions', () => {
  it('starts, updates (appending rate points) and finishes a session', () => {
    const state = fold([
      { kind: 'session.started', session: session('chatcmpl-1') },
      { kind: 'session.updated', session: session('chatcmpl-1', { completionTokens: 3, tokensPerSecond: 20, rate: [{ t: 10, tokensPerSecond: 20 }] }) },
      { kind: 'session.updated', session: session('chatcmpl-1', { completionTokens: 6, tokensPerSecond: 30, rate: [{ t: 10, tokensPerSecond: 20 }, { t: 20, tokensPerSecond: 30 }] }) },
    ]);
    expect(state.sessions).toHaveLength(1);
    expect(state.sessions[0]!.completionTokens).toBe(6);
    expect(state.sessions[0]!.rate).toEqual([{ t: 10, tokensPerSecond: 20 }, { t: 20, tokensPerSecond: 30 }]); // no duplicate point

    const done = applyEvent(state, {
      kind: 'session.finished',
      session: session('chatcmpl-1', { completionTokens: 8, state: 'finished', rate: [{ t: 30, tokensPerSecond: 31 }] }),
    });
    expect(done.sessions).toEqual([]);
    expect(done.finished.map((s) => [s.id, s.state, s.completionTokens])).toEqual([['chatcmpl-1', 'finished', 8]]);
    expect(done.finished[0]!.rate.map((p) => p.t)).toEqual([10, 20, 30]);
  });

  it('keeps the outcome and error of cancelled and failed sessions, newest first', () => {
    const state = fold([
      { kind: 'session.started', session: session('a') },
      { kind: 'session.started', session: session('b') },
      { kind: 'session.finished', session: session('a', { state: 'cancelled' }) },
      { kind: 'session.finished', session: session('b', { state: 'error', error: 'route unavailable' }) },
    ]);
    expect(state.finished.map((s) => [s.id, s.state, s.error])).toEqual([
      ['b', 'error', 'route unavailable'],
      ['a', 'cancelled', undefined],
    ]);
  });

  it('caps finished sessions at 50, dropping the oldest', () => {
    const events: MeshEvent[] = [];
    for (let i = 0; i < FINISHED_SESSIONS_CAP + 7; i++) {
      events.push({ kind: 'session.started', session: session(`s${i}`) });
      events.push({ kind: 'session.finished', session: session(`s${i}`, { state: 'finished' }) });
    }
    const state = fold(events);
    expect(state.finished).toHaveLength(FINISHED_SESSIONS_CAP);
    expect(state.finished[0]!.id).toBe(`s${FINISHED_SESSIONS_CAP + 6}`);
    expect(state.finished.at(-1)!.id).toBe('s7');
    expect(state.sessions).toEqual([]);
  });

  it('caps the rate series', () => {
    let state = fold([{ kind: 'session.started', session: session('a') }]);
    for (let t = 1; t <= RATE_POINTS_CAP + 10; t++) {
      state = applyEvent(state, { kind: 'session.updated', session: session('a', { rate: [{ t, tokensPerSecond: t }] }) });
    }
    const rate = state.sessions[0]!.rate;
    expect(rate).toHaveLength(RATE_POINTS_CAP);
    expect(rate[0]!.t).toBe(11);
    expect(rate.at(-1)!.t).toBe(RATE_POINTS_CAP + 10);
  });

  it('ignores updates of unknown sessions; a finish of an unknown one is still recorded once', () => {
    const state = fold([{ kind: 'session.started', session: session('a') }]);
    expect(applyEvent(state, { kind: 'session.updated', session: session('ghost', { completionTokens: 9 }) })).toBe(state);
    const twice = fold(
      [
        { kind: 'session.finished', session: session('late', { state: 'finished' }) },
        { kind: 'session.finished', session: session('late', { state: 'finished' }) },
      ],
      state,
    );
    expect(twice.finished.map((s) => s.id)).toEqual(['late']);
    expect(twice.sessions.map((s) => s.id)).toEqual(['a']);
  });

  it('snapshot replaces everything; totals replace the totals', () => {
    const other = fold([{ kind: 'peer.joined', peer: peer('x') }]);
    const state = fold([{ kind: 'session.started', session: session('a') }, { kind: 'snapshot', state: other }]);
    expect(state).toBe(other);
    const totals = { requests: 4, errors: 1, tokensOut: 99, tokensPerSecond: 12.5 };
    expect(applyEvent(state, { kind: 'totals', totals }).totals).toEqual(totals);
  });

  it('never mutates the state it is given', () => {
    const before = deepFreeze(
      fold([
        { kind: 'peer.joined', peer: peer('a') },
        { kind: 'session.started', session: session('s1', { rate: [{ t: 1, tokensPerSecond: 1 }] }) },
        { kind: 'session.started', session: session('s2') },
      ]),
    );
    const copy = structuredClone(before);
    const after = fold(
      [
        { kind: 'peer.updated', peer: peer('a', { status: 'ready' }) },
        { kind: 'peer.left', peerId: 'a' },
        { kind: 'route.changed', route: { hops: [] } },
        { kind: 'session.updated', session: session('s1', { rate: [{ t: 2, tokensPerSecond: 2 }] }) },
        { kind: 'session.finished', session: session('s2', { state: 'finished' }) },
        { kind: 'totals', totals: { requests: 1, errors: 0, tokensOut: 1, tokensPerSecond: 1 } },
      ],
      before,
    );
    expect(before).toEqual(copy);
    expect(after).not.toBe(before);
    expect(after.sessions[0]!.rate).toHaveLength(2);
  });
});

describe('parseMeshEvent', () => {
  it('accepts what the head serializes, by SSE event name', () => {
    const events: MeshEvent[] = [
      { kind: 'snapshot', state: fold([{ kind: 'peer.joined', peer: peer('a') }, { kind: 'session.started', session: session('s') }]) },
      { kind: 'peer.joined', peer: peer('a', { device: 'cuda:0' }) },
      { kind: 'peer.left', peerId: 'a' },
      { kind: 'route.changed', route: { hops: [{ peerId: 'a', range: { start: 0, end: 5 } }] } },
      { kind: 'session.finished', session: session('s', { state: 'error', error: 'x', timeToFirstTokenMs: 12 }) },
      { kind: 'session.updated', session: session('s', { links: ['head', 'direct'] }) },
      { kind: 'totals', totals: { requests: 1, errors: 0, tokensOut: 3, tokensPerSecond: 0 } },
    ];
    for (const event of events) {
      expect(parseMeshEvent(event.kind, JSON.parse(JSON.stringify(event)))).toEqual(event);
    }
    // the data may also be sent without its own kind
    expect(parseMeshEvent('peer.left', { peerId: 'a' })).toEqual({ kind: 'peer.left', peerId: 'a' });
  });

  it('refuses unknown kinds, disagreeing kinds and wrong shapes', () => {
    expect(parseMeshEvent('peer.exploded', { peerId: 'a' })).toBeUndefined();
    expect(parseMeshEvent('toString', {})).toBeUndefined();
    expect(parseMeshEvent('peer.left', { kind: 'peer.joined', peerId: 'a' })).toBeUndefined();
    expect(parseMeshEvent('peer.left', null)).toBeUndefined();
    expect(parseMeshEvent('peer.left', [])).toBeUndefined();
    expect(parseMeshEvent('peer.joined', { peer: { ...peer('a'), status: 'sleeping' } })).toBeUndefined();
    expect(parseMeshEvent('session.updated', { session: { ...session('s'), rate: [{ t: 'x' }] } })).toBeUndefined();
    expect(parseMeshEvent('session.updated', { session: { ...session('s'), timeToFirstTokenMs: null } })).toBeUndefined();
    expect(parseMeshEvent('session.updated', { session: { ...session('s'), links: ['sideways'] } })).toBeUndefined();
    expect(parseMeshEvent('snapshot', { state: { ...emptyState(), sessions: 'none' } })).toBeUndefined();
    expect(parseMeshEvent('totals', { totals: { requests: 1 } })).toBeUndefined();
  });
});
