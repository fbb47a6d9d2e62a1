/**
 * Keeps the dashboard state in step with the mesh: peers joining, loading, leaving, the
 * current route, and each peer's KV and token counters from periodic `stats` requests
 * (the heartbeat). The poll timer is owned here and stopped by `close`.
 */
import type { Mesh, MeshPeer } from '../../core/route/mesh.ts';
import type { StatsMessage } from '../../shared/control.ts';
import type { HeadMetrics } from '../metrics/head-metrics.ts';
import { peerView, routeView, type MeshStateStore } from './state-store.ts';

export interface MeshFeed {
  /** Latest stats per peer id (for /health). */
  readonly stats: ReadonlyMap<string, StatsMessage>;
  close(): void;
}

export function feedMeshState(mesh: Mesh, store: MeshStateStore, metrics: HeadMetrics, pollMs = 2000): MeshFeed {
  const stats = new Map<string, StatsMessage>();
  const heartbeats = new Map<string, number>();
  const view = (peer: MeshPeer) => peerView(peer, stats.get(peer.id), heartbeats.get(peer.id), mesh.model.bytesPerLayer);

  const sync = () => {
    const known = new Map(store.state.peers.map((p) => [p.id, p]));
    for (const peer of mesh.peers) {
      store.apply({ kind: known.get(peer.id) && known.get(peer.id)!.status !== 'gone' ? 'peer.updated' : 'peer.joined', peer: view(peer) });
      known.delete(peer.id);
    }
    for (const [id, peer] of known) {
      if (peer.status !== 'gone') {
        store.apply({ kind: 'peer.left', peerId: id });
        stats.delete(id);
        heartbeats.delete(id);
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
          stats.set(peer.id, answer);
          heartbeats.set(peer.id, Date.now());
          if (mesh.peers.includes(peer)) store.apply({ kind: 'peer.updated', peer: view(peer) });
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
    },
  };
}
