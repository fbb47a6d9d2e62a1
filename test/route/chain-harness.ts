/**
 * In-process chained meshes for Route Session tests: real ShardPeers (stories260k shards)
 * behind real ChainForwarders, joined by in-process outlets and ports (InProcessChains), a
 * real Mesh; each peer may be wrapped (a FaultyPeer) and its head link counts star frames.
 */
import { batchedChainRuns, type BatchedChainRuns } from '../../src/core/mesh/batched-chain-runs.ts';
import { Mesh, type MeshOptions } from '../../src/core/mesh/mesh.ts';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';
import type { ChainForwarder } from '../../src/core/peer/chain-forwarder.ts';
import { InProcessChains } from '../../src/core/peer/in-process-chain.ts';
import { decodeLaneFrame, laneFrameKind } from '../../src/core/frames/lane-frame-codec.ts';
import type { ShardPeer, ShardService } from '../../src/core/peer/shard-peer.ts';
import type { ChainPort } from '../../src/core/runtime/chain-port.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { meshModel } from '../../src/node/mesh-model.ts';
import type { ProtocolVersion } from '../../src/shared/protocol.ts';
import { CountingLink } from './peer-doubles.ts';
import { CountingProvider, createPeer, type EvictableShardPeer, type StoriesContext } from './route-harness.ts';

export interface ChainTestPeer {
  readonly shard: EvictableShardPeer;
  readonly forwarder: ChainForwarder;
  readonly port: ChainPort;
  /** The head's star link to it (counts star frames). */
  readonly link: CountingLink;
  /** Copies it sent the head (lanes of copy-lanes frames counted one by one). */
  copies: number;
  /** Frames those copies came in (kind 7 or kind 9). */
  copyFrames: number;
  /** Chain errors it reported to the head. */
  readonly reports: string[];
  /** Lane frames (kind 8) its forwarder was handed, by the head or another peer. */
  laneFramesIn: number;
  /** With `batched`: its chain frames' batching counts. */
  readonly batching?: () => BatchedChainRuns['stats'];
}

export interface ChainTestMesh {
  readonly mesh: Mesh;
  readonly provider: CountingProvider;
  readonly chains: InProcessChains;
  readonly peers: Map<string, ChainTestPeer>;
}

/**
 * `n` in-process peers p1…pn that run chained routes; `wrap` puts a double between a forwarder
 * and its shard; `batched`: each peer runs its chain frames through batchedChainRuns, as
 * Node peers and tabs do; `undialable`: peers no other peer can dial (as a tab: the link into
 * them goes through the head); `protocols`: what a peer's hello announced (default: this build's).
 */
export function chainMesh(ctx: StoriesContext, n: number, wrap?: (id: string, peer: ShardPeer) => ShardService, options: Partial<MeshOptions> = {}, batched = false, undialable: readonly string[] = [], protocols: Readonly<Record<string, ProtocolVersion>> = {}): ChainTestMesh {
  const mesh = new Mesh(meshModel(ctx.model, 'stories260k', 'fp32', weightSpec('fp32')), { headLayers: 'none', warmUpFrames: false, ...options }); // no warm-up frames: these tests count star frames
  const runs = new Map<ShardService, BatchedChainRuns>();
  const chains = new InProcessChains(batched ? (service) => {
    const r = batchedChainRuns(service);
    runs.set(service, r);
    return r.run;
  } : undefined);
  const peers = new Map<string, ChainTestPeer>();
  for (let i = 1; i <= n; i++) {
    const id = `p${i}`;
    const shard = createPeer(ctx);
    const service = wrap?.(id, shard) ?? shard;
    const { forwarder, port } = chains.join(id, service);
    const link = new CountingLink(new InProcessLink(forwarder));
    const r = runs.get(service);
    const peer: ChainTestPeer = { shard, forwarder, port, link, copies: 0, copyFrames: 0, laneFramesIn: 0, reports: [], ...(r && { batching: () => r.stats }) };
    port.listen({
      copy: (frame) => {
        peer.copyFrames++;
        peer.copies += laneFrameKind(frame) === 'copy-lanes' ? decodeLaneFrame(frame).lanes.length : 1;
      },
      report: (e) => peer.reports.push(`${e.code}: ${e.message}`),
    });
    const receive = forwarder.receiveChain.bind(forwarder);
    forwarder.receiveChain = (bytes, sender) => {
      if (laneFrameKind(bytes) !== undefined) peer.laneFramesIn++;
      return receive(bytes, sender);
    };
    peers.set(id, peer);
    const protocol = protocols[id];
    mesh.addPeer({ id, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link, chain: { port, dialable: !undialable.includes(id) }, ...(protocol && { protocol }) });
  }
  return { mesh, provider: new CountingProvider(mesh), chains, peers };
}
