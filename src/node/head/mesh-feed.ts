/**
 * Keeps the dashboard state in step with the mesh: peers joining, loading, leaving (shown
 * gone at once, dropped GONE_PEER_TTL_MS later), the current route, and each peer's KV and
 * token counters from periodic `stats` requests (the heartbeat), also into /metrics. The
 * poll and drop timers are owned here and stopped by `close`.
 */
import type { Mesh, MeshPeer } from '../../core/mesh/mesh.ts';
import type { StatsMessage } from '../../shared/control.ts';
import { GONE_PEER_TTL_MS } from '../../shared/dashboard-state.ts';
import type { HeadMetrics } from '../metrics/head-metrics.ts';
import { peerView, routeView, type MeshStateStore } from './state-store.ts';

export interface MeshFeed {
  /** Latest stats per peer id (for /health). */
  readonly stats: ReadonlyMap<string, StatsMessage>;
  close(): void;
}

export function feedMeshState(mesh: Mesh, store: MeshStateStore, metrics: HeadMetrics, pollMs = 2000, goneTtlMs = GONE_PEER_TTL_MS): MeshFeed {
  const stats = new Map<string, StatsMessage>();
  const heartbeats = new Map<string, number>();
  const drops = new Map<string, ReturnType<typeof setTimeout>>();
  const view = (peer: MeshPeer) => peerView(peer, stats.get(peer.id), heartbeats.get(peer.id), mesh.model.bytesPerLayer);

  const sync = () => {
    const known = new Map(store.state.peers.map((p) => [p.id, p]));
    for (const peer of mesh.peers) {
      store.apply({ kind: known.get(peer.id) && known.get(peer.id)!.status !== 'gone' ? 'peer.updated' : 'peer.joined', peer: view(peer) });
      known.delete(peer.id);
      clearTimeout(drops.get(peer.id)); // back before its gone entry was dropped
      drops.delete(peer.id);
    }
    for (const [id, peer] of known) {
      if (peer.status !== 'gone') {
        store.apply({ kind: 'peer.left', peerId: id, at: Date.now() });
        metrics.removePeer(id);
        stats.delete(id);
        heartbeats.delete(id);
        const drop = setTimeout(() => {
          drops.delete(id);
          store.apply({ kind: 'peer.removed', peerId: id });
        }, goneTtlMs);
        drop.unref();
        drops.set(id, drop);
      }
    }
    try {
      store.apply({ kind: 'route.changed', route: routeView(mesh.plan().hops) });
    } catch (error) {
      store.apply({ kind: 'route.changed', route: routeView([], error instanceof Error ? error.message : String(error)) });
    }
    const counts: Record<string, number> = {};
    for (const peer of mesh.peers) counts[peer.runtime] = (counts[peer.runtime] ?? 0) + 1;
    metrics.setPeers(counts);
  };

  const poll = async () => {
    await Promise.all(
      mesh.peers.map(async (peer) => {
        try {
          const answer = await peer.link.control({ kind: 'stats', kvEntries: 0, kvBytes: 0, kvBudgetBytes: 0, tokensServed: 0, framesServed: 0 }, AbortSignal.timeout(pollMs));
          if (answer.kind !== 'stats') return;
          if (!mesh.peers.includes(peer)) return; // it left while we asked
          stats.set(peer.id, answer);
          heartbeats.set(peer.id, Date.now());
          metrics.setPeerKv(peer.id, answer.kvBytes, answer.kvEntries);
          store.apply({ kind: 'peer.updated', peer: view(peer) });
        } catch {
          // No heartbeat this round: the dashboard shows its age growing.
        }
      }),
    );
    metrics.setKv([...stats.values()]);
  };

  const off = mesh.onChange(sync);
  sync();
  const timer = setInterval(() => void poll(), pollMs);
  timer.unref();
  return {
    stats,
    close() {
      off();
      clearInterval(timer);
      for (const drop of drops.values()) clearTimeout(drop);
      drops.clear();
    },
  };
}
