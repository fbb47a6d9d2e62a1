/**
 * A fixed route of in-process peers: complete-model mode (one process holds every layer,
 * optionally as a chain of shards) runs the same Route Session as a mesh, with one
 * in-process hop per shard. There is nobody to replace a hop with.
 */
import type { AssignMessage } from '../../shared/control.ts';
import type { LayerRange } from '../model/types.ts';
import { ShardPeer } from '../peer/shard-peer.ts';
import { InProcessLink } from '../runtime/in-process-link.ts';
import { BatchingLink } from './batching-link.ts';
import { LeasedLink } from './leased-link.ts';
import type { PeerLink } from '../runtime/peer-link.ts';
import type { ShardExecutor } from '../runtime/shard-executor.ts';
import type { HopLease, RouteProvider } from './route-provider.ts';

export class StaticRoute implements RouteProvider {
  constructor(private readonly hops: readonly { readonly peerId: string; readonly range: LayerRange; readonly link: PeerLink }[]) {}

  async route(): Promise<HopLease[]> {
    return this.hops.map((hop) => ({ peerId: hop.peerId, range: hop.range, link: new LeasedLink(hop.link) }));
  }

  async replace(): Promise<undefined> {
    return undefined;
  }
}

/** In-process peers serving already-loaded executors, one hop each, and the route over them. */
export async function inProcessRoute(
  executors: readonly ShardExecutor[],
  memoryBudgetBytes = Number.MAX_SAFE_INTEGER,
  options: { readonly batching?: boolean; readonly prefixBudgetBytes?: number } = {},
): Promise<{ route: StaticRoute; peers: ShardPeer[] }> {
  const peers: ShardPeer[] = [];
  const hops = [];
  for (const [i, executor] of executors.entries()) {
    const peer = new ShardPeer({ loader: { load: async () => executor }, memoryBudgetBytes, prefixBudgetBytes: options.prefixBudgetBytes });
    // The loader ignores the assignment's details: the executor is already loaded.
    const assign = { kind: 'assign', range: executor.range, weights: executor.loaded.weights } as AssignMessage;
    const ready = await peer.handleControl(assign);
    if (ready.kind !== 'ready') throw new Error(`in-process shard ${i} did not load: ${JSON.stringify(ready)}`);
    peers.push(peer);
    const link = new InProcessLink(peer);
    hops.push({ peerId: `local-shard-${i}`, range: executor.range, link: options.batching === false ? link : new BatchingLink(link) });
  }
  return { route: new StaticRoute(hops), peers };
}
