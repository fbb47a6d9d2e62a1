import { describe, expect, it } from 'vitest';
import type { MeshPeer } from '../../src/core/mesh/mesh.ts';
import type { SessionTelemetry } from '../../src/core/route/route-types.ts';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';
import { MeshStateStore, peerView, routeView, sessionView } from '../../src/node/head/state-store.ts';
import { parseMeshEvent } from '../../src/shared/dashboard-events.ts';
import type { MeshEvent } from '../../src/shared/dashboard-state.ts';

const telemetry = (): SessionTelemetry => ({
  sessionId: '1b4e28ba-2fa1-41d2-883f-0016d3cca427',
  startedAt: 1000,
  promptTokens: 4,
  completionTokens: 11,
  timeToFirstTokenMs: 100,
  outcome: 'running',
  hops: [{ peerId: 'a', range: { start: 0, end: 5 }, frames: 4, tokens: 14, totalMs: 10, lastMs: 2, kvPositions: 14 }],
  repairs: [{ kind: 'replaced', cause: 'lost', hop: 0, range: { start: 0, end: 5 }, peerId: 'a', lostPeerId: 'b', position: 13, reason: 'peer left' }],
  releases: [],
});

describe('sessionView', () => {
  it('derives the decode rate, hop means and repairs, and copies (telemetry keeps changing)', () => {
    const t = telemetry();
    const view = sessionView('chatcmpl-9', 'demo', t, 1600); // 10 tokens after the first in 500 ms
    expect(view).toEqual({
      id: 'chatcmpl-9',
      model: 'demo',
      promptTokens: 4,
      completionTokens: 11,
      startedAt: 1000,
      timeToFirstTokenMs: 100,
      tokensPerSecond: 20,
      rate: [{ t: 1600, tokensPerSecond: 20 }],
      hops: [{ peerId: 'a', range: { start: 0, end: 5 }, frames: 4, tokens: 14, lastMs: 2, meanMs: 2.5, kvPositions: 14 }],
      repairs: [{ kind: 'replaced', hop: 0, peerId: 'a', lostPeerId: 'b' }],
      state: 'running',
    });
    t.hops[0]!.lastMs = 99;
    expect(view.hops[0]!.lastMs).toBe(2);
    // A chained route's links (protocol 3.2) are copied once the session has stepped.
    t.links = ['direct'];
    expect(sessionView('chatcmpl-9', 'demo', t, 1600).links).toEqual(['direct']);
  });

  it('is 0 tokens/s before the first token and uses finishedAt once closed', () => {
    expect(sessionView('x', 'demo', { ...telemetry(), timeToFirstTokenMs: undefined, completionTokens: 0 }, 5000).tokensPerSecond).toBe(0);
    const closed = sessionView('x', 'demo', { ...telemetry(), finishedAt: 2100, outcome: 'error', error: 'boom' }, 9999);
    expect(closed.tokensPerSecond).toBe(10);
    expect(closed.state).toBe('error');
    expect(closed.error).toBe('boom');
  });
});

describe('peerView and routeView', () => {
  const peer = (ranges: MeshPeer['ranges']): MeshPeer => ({
    id: 'p1',
    runtime: 'browser',
    executionProvider: 'webgpu',
    memoryBudgetBytes: 1024,
    link: {} as PeerLink,
    joinedAt: 500,
    ranges,
  });

  it('is joining without ranges, ready with them, and takes KV and tokens from stats', () => {
    expect(peerView(peer([]))).toMatchObject({ status: 'joining', kvBytes: 0, tokensServed: 0, lastHeartbeatAt: 500, layers: [] });
    const stats = { kind: 'stats', kvEntries: 2, kvBytes: 300, kvBudgetBytes: 900, tokensServed: 40, framesServed: 9 } as const;
    expect(peerView(peer([{ start: 0, end: 2 }]), stats, 800)).toEqual({
      id: 'p1',
      runtime: 'browser',
      executionProvider: 'webgpu',
      layers: [{ start: 0, end: 2 }],
      memoryBudgetBytes: 1024,
      kvBytes: 300,
      kvEntries: 2,
      status: 'ready',
      lastHeartbeatAt: 800,
      tokensServed: 40,
    });
  });

  it('is quarantined while the mesh says so, with the reason and the time it is tried again (the dashboard reads it)', () => {
    const quarantine = { since: 1000, until: 11_000, reason: 'hung on layers [0, 2): no answer within 5000 ms', strikes: 1 };
    const view = peerView({ ...peer([{ start: 0, end: 2 }]), quarantine });
    expect(view).toMatchObject({ status: 'quarantined', quarantine });
    expect(parseMeshEvent('peer.updated', { kind: 'peer.updated', peer: view })).toEqual({ kind: 'peer.updated', peer: view });
  });

  it('routeView leaves links out', () => {
    const hops = [{ peerId: 'a', range: { start: 0, end: 2 }, link: {} as PeerLink }];
    expect(routeView(hops)).toEqual({ hops: [{ peerId: 'a', range: { start: 0, end: 2 } }] });
    expect(routeView([], 'no peers')).toEqual({ hops: [], reason: 'no peers' });
  });
});

describe('MeshStateStore', () => {
  it('folds events and fans them out until unsubscribed; a throwing listener does not stop others', () => {
    const errors: unknown[] = [];
    const store = new MeshStateStore({ onError: (e) => errors.push(e) });
    const seen: string[] = [];
    store.subscribe(() => {
      throw new Error('broken client');
    });
    const stop = store.subscribe((event, state) => seen.push(`${event.kind}:${state.route.hops.length}`));
    const event: MeshEvent = { kind: 'route.changed', route: { hops: [{ peerId: 'a', range: { start: 0, end: 1 } }] } };
    store.apply(event);
    stop();
    store.apply({ kind: 'route.changed', route: { hops: [] } });
    expect(seen).toEqual(['route.changed:1']);
    expect(errors).toHaveLength(2);
    expect(store.state.route.hops).toEqual([]);
    expect(store.snapshotEvent()).toEqual({ kind: 'snapshot', state: store.state });
  });
});
