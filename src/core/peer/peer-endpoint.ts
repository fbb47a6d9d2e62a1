/**
 * The peer's end of a socket: binary frames go to the ShardPeer and its result (or error)
 * goes back; control requests (assign, release, unload, ping, stats) are answered with the same
 * id; anything else (welcome, errors from the head) goes to `onMessage`. Used by Node and
 * browser peers alike, over relay and direct sockets. With `chain` (protocol 3.2), chain
 * frames the head posts (kind 6, or 8 with lanes) go to the peer's ChainForwarder, and the link that carries them (or a
 * `chain` message) is where its copies and reports go back.
 */
import { errorToControlMessage } from '../../shared/control-errors.ts';
import { parseControlMessage, serializeControlMessage, type ControlMessage } from '../../shared/control.ts';
import { FRAME_HEADER_BYTES, FRAME_KIND_CODES, FRAME_OFFSETS } from '../../shared/frame-layout.ts';
import { laneFrameKind } from '../frames/lane-frame-codec.ts';
import type { LinkSocket } from '../runtime/socket-link.ts';
import type { ShardService } from '../runtime/shard-service.ts';
import { hopMark } from '../runtime/hop-trace.ts';

const PEER_REQUESTS = new Set<ControlMessage['kind']>(['assign', 'release', 'unload', 'fork', 'forget', 'ping', 'stats', 'chain']);

/** What an endpoint on the head's link does with chained routes (protocol 3.2). */
export interface EndpointChain {
  /** A chain frame the head posted on this link. */
  receive(bytes: Uint8Array): void;
  /** This link is the one the head chains on: copies and reports go back on it. */
  headIsOn(endpoint: PeerEndpoint): void;
}

export class PeerEndpoint {
  private closed = false;

  constructor(
    private readonly peer: ShardService,
    private readonly socket: LinkSocket,
    private readonly onMessage: (message: ControlMessage) => void = () => {},
    private readonly chain?: EndpointChain,
  ) {}

  /** Send a binary frame (a copy to the head). */
  sendFrame(frame: Uint8Array): void {
    if (!this.closed) this.socket.send(frame);
  }

  send(message: ControlMessage): void {
    if (!this.closed) this.socket.send(serializeControlMessage(message));
  }

  /** Feed one incoming socket message; answers are sent as they complete. */
  async receive(data: string | Uint8Array): Promise<void> {
    if (this.closed) return;
    if (typeof data !== 'string') {
      if (this.chain && data.byteLength >= FRAME_HEADER_BYTES && (data[FRAME_OFFSETS.kind] === FRAME_KIND_CODES.chain || laneFrameKind(data) === 'chain-lanes')) {
        this.chain.headIsOn(this);
        this.chain.receive(data);
        return;
      }
      hopMark('peer.recv');
      const reply = await this.peer.handleFrame(data);
      if (this.closed) return;
      hopMark('peer.send');
      if ('frame' in reply) this.socket.send(reply.frame);
      else this.send(reply.error);
      hopMark('peer.sent');
      return;
    }
    let message: ControlMessage;
    try {
      message = parseControlMessage(data);
    } catch (error) {
      this.send(errorToControlMessage(error));
      return;
    }
    // A ping asks whether this connection is alive, so it is answered here at once, not
    // behind a shard run (a busy worker must not look dead to the head).
    if (message.kind === 'ping') this.send({ kind: 'pong', ...(message.id !== undefined && { id: message.id }), t: message.t });
    else if (PEER_REQUESTS.has(message.kind)) {
      if (message.kind === 'chain') this.chain?.headIsOn(this);
      this.send(await this.peer.handleControl(message));
    }
    else this.onMessage(message);
  }

  /** The socket is gone: stop answering. The peer's KV stays until released or evicted. */
  terminated(): void {
    this.closed = true;
  }
}
