/**
 * The dashboard's view of a whole run: the browser folds a snapshot taken at any point and
 * the events after it (what `/api/events` sends on each connection, reconnects included),
 * through JSON and `parseMeshEvent` as the page does, and must reach the head's state.
 */
import { describe, expect, it } from 'vitest';
import { parseMeshEvent } from '../../src/shared/dashboard-events.ts';
import { applyEvent, emptyState, type MeshEvent, type MeshState, type PeerView, type SessionView } from '../../src/shared/dashboard-state.ts';

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

const hops = (kv: number) => [
  { peerId: 'a', range: { start: 0, end: 3 }, frames: kv, tokens: kv, lastMs: 1.5, meanMs: 1.2, kvPositions: kv },
  { peerId: 'b', range: { start: 3, end: 5 }, frames: kv, tokens: kv, lastMs: 2.5, meanMs: 2.1, kvPositions: kv },
];

const session = (tokens: number, t: number, extra: Partial<SessionView> = {}): SessionView => ({
  id: 'cmpl-1',
  model: 'stories260k',
  promptTokens: 3,
  completionTokens: tokens,
  startedAt: 2000,
  timeToFirstTokenMs: 12,
  tokensPerSecond: tokens * 10,
  rate: [{ t, tokensPerSecond: tokens * 10 }], // the head sends the newest point only
  hops: hops(3 + tokens),
  repairs: [],
  state: 'running',
  ...extra,
});

/** One run as the head emits it: peers join and load, a session streams, a peer dies. */
const run: MeshEvent[] = [
  { kind: 'peer.joined', peer: peer('a') },
  { kind: 'peer.joined', peer: peer('b') },
  { kind: 'peer.updated', peer: peer('a', { status: 'ready', layers: [{ start: 0, end: 3 }] }) },
  { kind: 'peer.updated', peer: peer('b', { status: 'ready', layers: [{ start: 3, end: 5 }] }) },
  { kind: 'route.changed', route: { hops: [{ peerId: 'a', range: { start: 0, end: 3 } }, { peerId: 'b', range: { start: 3, end: 5 } }] } },
  { kind: 'session.started', session: session(0, 2000) },
  { kind: 'totals', totals: { requests: 1, errors: 0, tokensOut: 0, tokensPerSecond: 0 } },
  { kind: 'session.updated', session: session(5, 2100) },
  { kind: 'session.updated', session: session(11, 2200) },
  { kind: 'peer.updated', peer: peer('a', { status: 'ready', layers: [{ start: 0, end: 3 }], kvBytes: 4096, kvEntries: 1, tokensServed: 11, lastHeartbeatAt: 2250 }) },
  {
    kind: 'session.updated',
    session: session(17, 2300, { repairs: [{ kind: 'cache_miss', hop: 1, peerId: 'b' }] }),
  },
  { kind: 'session.finished', session: session(20, 2340, { state: 'finished', repairs: [{ kind: 'cache_miss', hop: 1, peerId: 'b' }] }) },
  { kind: 'totals', totals: { requests: 1, errors: 0, tokensOut: 20, tokensPerSecond: 0 } },
  { kind: 'peer.left', peerId: 'b' },
  { kind: 'route.changed', route: { hops: [], reason: 'no ready peer holds layers [3, 5)' } },
];

const start = () => emptyState({ id: 'stories260k', numLayers: 5, dtype: 'fp32' }, 1);

/** What the page does with one event: JSON over SSE, checked, folded. */
function overTheWire(state: MeshState, event: MeshEvent): MeshState {
  const parsed = parseMeshEvent(event.kind, JSON.parse(JSON.stringify(event)));
  if (!parsed) throw new Error(`the page would drop ${event.kind}`);
  return applyEvent(state, parsed);
}

describe('dashboard sequences', () => {
  const head = run.reduce(applyEvent, start());

  it('folds a whole run to what the head holds: finished outcome, rate series, gone peer, no route', () => {
    expect(head.sessions).toEqual([]);
    expect(head.finished.map((s) => [s.id, s.state, s.completionTokens])).toEqual([['cmpl-1', 'finished', 20]]);
    expect(head.finished[0]!.rate.map((p) => p.tokensPerSecond)).toEqual([0, 50, 110, 170, 200]);
    expect(head.finished[0]!.hops.map((h) => h.kvPositions)).toEqual([23, 23]);
    expect(head.finished[0]!.repairs).toHaveLength(1);
    expect(head.peers.map((p) => [p.id, p.status])).toEqual([
      ['a', 'ready'],
      ['b', 'gone'],
    ]);
    expect(head.peers[0]!.kvBytes).toBe(4096);
    expect(head.route.hops).toEqual([]);
    expect(head.route.reason).toMatch(/\[3, 5\)/);
    expect(head.totals.tokensOut).toBe(20);
  });

  it('a page that connects (or reconnects) at any point reaches the same state', () => {
    for (let cut = 0; cut <= run.length; cut++) {
      const atConnect = run.slice(0, cut).reduce(applyEvent, start());
      // A page that saw events before the cut, lost the stream, and got a fresh snapshot.
      const stale = run.slice(0, Math.floor(cut / 2)).reduce(overTheWire, start());
      const page = run.slice(cut).reduce(overTheWire, overTheWire(stale, { kind: 'snapshot', state: atConnect }));
      expect(page, `connected after ${cut} events`).toEqual(head);
    }
  });

  it('a live session seen mid-stream shows its growing count and keeps its earlier rate points', () => {
    const states = run.slice(0, 11).reduce<MeshState[]>((all, event) => [...all, overTheWire(all[all.length - 1] ?? start(), event)], []);
    const counts = states.filter((s) => s.sessions.length === 1).map((s) => s.sessions[0]!.completionTokens);
    expect(counts).toEqual([0, 0, 5, 11, 11, 17]);
    const live = states[states.length - 1]!.sessions[0]!;
    expect(live.rate.map((p) => p.t)).toEqual([2000, 2100, 2200, 2300]);
    expect(live.hops.map((h) => h.peerId)).toEqual(['a', 'b']);
    expect(live.repairs.map((r) => r.kind)).toEqual(['cache_miss']);
  });
});
