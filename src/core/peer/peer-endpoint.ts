/**
 * The peer's end of a socket: binary frames go to the ShardPeer and its result (or error)
 * goes back; control requests (assign, release, unload, ping, stats) are answered with the same
 * id; anything else (welcome, errors from the head) goes to `onMessage`. Used by Node and
 * browser peers alike, over relay and direct sockets.
 */
import { errorToControlMessage } from '../../shared/control-errors.ts';
import { parseControlMessage, serializeControlMessage, type ControlMessage } from '../../shared/control.ts';
import type { LinkSocket } from '../runtime/socket-link.ts';
import type { ShardService } from '../runtime/shard-service.ts';

const PEER_REQUESTS = new Set<ControlMessage['kind']>(['assign', 'release', 'unload', 'fork', 'ping', 'stats']);

export class PeerEndpoint {
  private closed = false;

  constructor(
    private readonly peer: ShardService,
    private readonly socket: LinkSocket,
    private readonly onMessage: (message: ControlMessage) => void = () => {},
  ) {}

  send(message: ControlMessage): void {
    if (!this.closed) this.socket.send(serializeControlMessage(message));
  }

  /** Feed one incoming socket message; answers are sent as they complete. */
  async receive(data: string | Uint8Array): Promise<void> {
    if (this.closed) return;
    if (typeof data !== 'string') {
      const reply = await this.peer.handleFrame(data);
      if (this.closed) return;
      if ('frame' in reply) this.socket.send(reply.frame);
      else this.send(reply.error);
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
    else if (PEER_REQUESTS.has(message.kind)) this.send(await this.peer.handleControl(message));
    else this.onMessage(message);
  }

  /** The socket is gone: stop answering. The peer's KV stays until released or evicted. */
  terminated(): void {
    this.closed = true;
  }
}
