/**
 * In-process PeerLink: the head's own layers (and tests) reach a ShardPeer by direct call.
 * Frames still go through the real codec, so behaviour matches the socket links.
 */
import { errorFromControlMessage } from '../../shared/control-errors.ts';
import type { ControlMessage } from '../../shared/control.ts';
import type { ShardPeer } from '../peer/shard-peer.ts';
import { LinkClosedError, type PeerLink } from './peer-link.ts';

export class InProcessLink implements PeerLink {
  readonly closed: Promise<void>;
  private markClosed!: () => void;
  private closeReason: string | undefined;
  private readonly handlers = new Set<(message: ControlMessage) => void>();

  constructor(private readonly peer: ShardPeer) {
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
  }

  async request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    this.assertOpen();
    signal?.throwIfAborted();
    const reply = await this.peer.handleFrame(frame.slice());
    this.assertOpen(); // dropped while the peer was working: the answer is lost, as on a socket
    signal?.throwIfAborted();
    if ('error' in reply) throw errorFromControlMessage(reply.error);
    return reply.frame;
  }

  async control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    this.assertOpen();
    signal?.throwIfAborted();
    const answer = await this.peer.handleControl(message);
    this.assertOpen();
    if (answer.kind === 'error') throw errorFromControlMessage(answer);
    return answer;
  }

  onMessage(handler: (message: ControlMessage) => void): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  async close(reason = 'closed by the head'): Promise<void> {
    if (this.closeReason !== undefined) return;
    this.closeReason = reason;
    this.handlers.clear();
    this.markClosed();
  }

  private assertOpen(): void {
    if (this.closeReason !== undefined) throw new LinkClosedError(this.closeReason);
  }
}
