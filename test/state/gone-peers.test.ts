/**
 * Peers that leave, as /api/state and /metrics show them: a peer process killed with SIGKILL
 * is `gone` at once, with no layers and no KV figures left, and its KV series leave /metrics;
 * the feed drops a gone peer after its time to live (60 s by default; shortened here), not
 * before, and a peer that comes back first is not dropped.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { feedMeshState } from '../../src/node/head/mesh-feed.ts';
import { MeshStateStore } from '../../src/node/head/state-store.ts';
import { HeadMetrics } from '../../src/node/metrics/head-metrics.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import type { PeerView } from '../../src/shared/dashboard-state.ts';
import { eventually, serveStories } from '../api/api-harness.ts';
import { createPeer, inProcessMesh, useStories } from '../route/route-harness.ts';

const stories = useStories('gone-peers');

describe('a killed peer process', () => {
  let serving: ServingHead;
  afterAll(async () => {
    await serving?.close();
  });

  it('is gone in /api/state at once, with no layers and no KV, and leaves /metrics', async () => {
    serving = await serveStories({ localPeers: 1, headLayers: 'none' });
    await serving.head.waitForPeers(1, 60_000);
    const state = async () => (await (await fetch(`${serving.head.url}api/state`)).json()) as { peers: PeerView[] };
    // Ready and reported: its range loaded, a heartbeat with its KV figures in.
    expect(await eventually(() => serving.store.state.peers.some((p) => p.status === 'ready') && serving.metrics.render().includes('meshnet_peer_kv_bytes{peer="local-1"}'), 20_000)).toBe(true);
    const killedAt = Date.now();
    serving.peers!.processes[0]!.kill('SIGKILL');
    expect(await eventually(() => serving.store.state.peers.some((p) => p.id === 'local-1' && p.status === 'gone'), 5000)).toBe(true);
    const seenAfterMs = Date.now() - killedAt;
    const gone = (await state()).peers.find((p) => p.id === 'local-1')!;
    expect(gone).toMatchObject({ status: 'gone', layers: [], kvBytes: 0, kvEntries: 0 });
    expect(gone.goneAt).toBeGreaterThanOrEqual(killedAt);
    expect(seenAfterMs, 'gone within a second of the kill').toBeLessThan(1000);
    expect(serving.metrics.render()).not.toContain('peer="local-1"');
  });
});

describe('the feed drops gone peers after their time to live', () => {
  it('not before the time to live; a peer back in time is kept', async () => {
    const t = inProcessMesh(stories.ctx, 2);
    const store = new MeshStateStore();
    const feed = feedMeshState(t.mesh, store, new HeadMetrics(), 60_000, 300);
    try {
      await t.links.get('p1')!.close('killed');
      await t.links.get('p2')!.close('killed');
      await new Promise((resolve) => setTimeout(resolve, 10));
      expect(store.state.peers.map((p) => [p.id, p.status])).toEqual([
        ['p1', 'gone'],
        ['p2', 'gone'],
      ]);
      // p2 comes back before its entry is dropped.
      t.mesh.addPeer({ id: 'p2', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(createPeer(stories.ctx)) });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(store.state.peers.map((p) => p.id).sort()).toEqual(['p1', 'p2']);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(store.state.peers.map((p) => [p.id, p.status])).toEqual([['p2', 'joining']]);
    } finally {
      feed.close();
    }
  });
});
