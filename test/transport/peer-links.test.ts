/**
 * The PeerLink conformance suite against every implementation: in-process, direct (the head
 * dials a peer's WebSocket server) and relay (a peer dials the head's /peer/ws through
 * runPeer; the mesh's link for it is the link under test). Loopback, port 0 only.
 */
import type { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { afterAll, beforeAll } from 'vitest';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { SocketLink } from '../../src/core/runtime/socket-link.ts';
import type { RunningHead } from '../../src/node/head/head-node.ts';
import { dialSocket } from '../../src/node/net/ws-dial.ts';
import { runPeer } from '../../src/node/peer/run-peer.ts';
import { createPeer, useStories } from '../route/route-harness.ts';
import { peerLinkSuite } from '../suites/peer-link.suite.ts';
import { JOIN_TOKEN, startDirectPeerServer, startStoriesHead } from './transport-harness.ts';

const stories = useStories('peer-links');
let head: RunningHead;
let peerCount = 0;

beforeAll(async () => {
  head = await startStoriesHead(stories.ctx, 'relay');
});
afterAll(async () => {
  await head?.close();
});

peerLinkSuite(
  'in-process',
  async () => {
    const peer = createPeer(stories.ctx);
    const link = new InProcessLink(peer);
    return { link, peer, drop: () => link.close('the peer vanished'), cleanup: async () => (await link.close(), await peer.dispose()) };
  });

peerLinkSuite('direct', async () => {
  const peer = createPeer(stories.ctx);
  const server = await startDirectPeerServer(peer);
  const dialed = await dialSocket(server.url);
  const link = new SocketLink(dialed.socket, { timeoutMs: 30_000 });
  dialed.attach(link);
  return {
    link,
    peer,
    drop: async () => server.dropAll('the peer vanished'),
    cleanup: async () => {
      await link.close();
      await server.close();
      await peer.dispose();
    },
  };
});

peerLinkSuite(
  'relay',
  async () => {
    const running = await runPeer({ headUrl: head.peerUrl, device: 'cpu', memoryBudgetBytes: 1 << 30, joinToken: JOIN_TOKEN, peerId: `relay-${++peerCount}`, threads: 1 });
    const member = head.mesh.peers.find((p) => p.id === running.peerId);
    if (!member) throw new Error(`peer ${running.peerId} is not in the mesh after its welcome`);
    return {
      link: member.link,
      peer: running.shard as ShardPeer, // in-process (worker: false), so the suite can hold its frames
      drop: () => running.close(),
      cleanup: async () => {
        await running.close();
        head.mesh.removePeer(running.peerId);
      },
    };
  });
