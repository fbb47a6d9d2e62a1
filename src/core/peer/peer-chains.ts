/**
 * A peer's chained routes (protocol 3.2), Node peer and browser tab alike: its ChainForwarder,
 * the head link its copies and reports go back on (the one the head chains on), the links it
 * dials to next hops (only at a URL the head named in a `chain` message, authenticated as
 * itself with a `hop` proof, direct-handshake.ts), and — on a Node peer with a listener — the
 * links other peers dialled into it (their chain frames, by the sender the handshake proved).
 * A peer-to-peer link carries chain frames one way and nothing else. How a WebSocket is opened
 * is the caller's (`dial`: Node's client, or the tab's native WebSocket).
 */
import type { HopDialer, HopOutlet } from '../runtime/chain-port.ts';
import type { FrameReply, ShardService } from '../runtime/shard-service.ts';
import { laneFrameKind, peekLanes } from '../frames/lane-frame-codec.ts';
import { ChainForwarder } from './chain-forwarder.ts';
import { authenticateDialled, urlWithoutQuery, type DialledLink } from './direct-handshake.ts';
import type { EndpointChain, PeerEndpoint } from './peer-endpoint.ts';

export interface PeerChainsOptions {
  readonly shard: ShardService;
  readonly peerId: string;
  readonly joinToken: string | undefined;
  /** Open a WebSocket to `url` (not yet authenticated; rejects when it cannot connect). */
  readonly dial: (url: string) => Promise<DialledLink>;
  /** How chain frames run on the shard (ChainForwarderOptions.run: batched, or one by one). */
  readonly run?: (bytes: Uint8Array) => Promise<FrameReply>;
  /** Held before each frame this peer sends another peer (the bench's `--link-delay-ms`). */
  readonly linkDelayMs?: number;
  readonly log?: (line: string) => void;
}

export interface PeerChains {
  readonly forwarder: ChainForwarder;
  /** For the PeerEndpoints of the head's links. */
  readonly endpoint: EndpointChain;
  /** Binary messages other peers sent this peer on peer-to-peer links, and the chain steps (lanes) they carried. */
  readonly received: { readonly frames: number; readonly lanes: number };
  /** What a socket another peer dialled in on (authenticated as `from`) does with each message. */
  hopSink(from: string): (data: string | Uint8Array) => void;
  /** Close every link this peer dialled. */
  close(): void;
}

export function peerChains(options: PeerChainsOptions): PeerChains {
  const log = options.log ?? (() => {});
  let head: PeerEndpoint | undefined;
  const dialled = new Set<{ close(code?: number, reason?: string): void }>();
  const dialer: HopDialer = {
    async outlet(to): Promise<HopOutlet> {
      if (to.url === undefined) throw new Error(`no address for peer ${to.peerId}`);
      const where = urlWithoutQuery(to.url);
      const opened = await options.dial(to.url).catch((error: unknown) => {
        throw new Error(`could not connect to ${where}: ${(error instanceof Error ? error.message : String(error)).replaceAll(to.url!, where)}`);
      });
      const link = await authenticateDialled(opened, where, { peerId: to.peerId, joinToken: options.joinToken, from: options.peerId });
      dialled.add(link.socket);
      let closed = false;
      link.attach({
        receive: (data) => log(`peer ${to.peerId} sent ${typeof data === 'string' ? data.slice(0, 200) : `${data.byteLength} bytes`} on a forward link; ignored`),
        terminated: (reason) => {
          closed = true;
          dialled.delete(link.socket);
          log(`forward link to ${to.peerId} closed: ${reason}`);
        },
      });
      const delay = options.linkDelayMs ?? 0;
      return {
        get closed() {
          return closed;
        },
        send(frame) {
          if (closed) throw new Error(`the link to ${to.peerId} is closed`);
          if (delay > 0) setTimeout(() => !closed && link.socket.send(frame), delay);
          else link.socket.send(frame);
        },
      };
    },
  };
  const forwarder = new ChainForwarder({
    peer: options.shard,
    peerId: options.peerId,
    dialer,
    ...(options.run && { run: options.run }),
    head: { copy: (frame) => head?.sendFrame(frame), report: (error) => head?.send(error) },
  });
  const received = { frames: 0, lanes: 0 };
  return {
    forwarder,
    get received() {
      return { ...received };
    },
    endpoint: {
      receive: (bytes) => void forwarder.receiveChain(bytes, 'head'),
      headIsOn: (endpoint) => (head = endpoint),
    },
    hopSink: (from) => (data) => {
      if (typeof data === 'string') log(`peer ${from} sent a control message on a peer-to-peer link; ignored`);
      else {
        received.frames++;
        received.lanes += laneFrameKind(data) === 'chain-lanes' ? peekLanes(data).length : 1;
        void forwarder.receiveChain(data, from);
      }
    },
    close() {
      for (const socket of dialled) socket.close(1000, 'peer shutting down');
      dialled.clear();
    },
  };
}
