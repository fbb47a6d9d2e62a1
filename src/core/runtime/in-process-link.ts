/**
 * In-process PeerLink: the head's own layers (and tests) reach a ShardPeer (or its worker
 * proxy) by direct call.
 * Frames still go through the real codec, so behaviour matches the socket links.
 */
import { errorFromControlMessage } from '../../shared/control-errors.ts';
import type { ControlMessage } from '../../shared/control.ts';
import type { ShardService } from './shard-service.ts';
import { frameRequestId, FRAME_HEADER_BYTES, stampFrameRequestId } from '../../shared/frame-layout.ts';
import { LinkAnswerError, LinkClosedError, type PeerLink } from './peer-link.ts';

export class InProcessLink implements PeerLink {
  readonly closed: Promise<void>;
  private markClosed!: () => void;
  private closeReason: string | undefined;
  /**
   * The calls in flight, each by its rejecter: close rejects them at once, as on a socket. A
   * set, not an abort listener per call on one long-lived signal: the head's own layers take
   * every session's frames on one link (32 sessions, 32 listeners, and Node's warning).
   */
  private readonly pending = new Set<(error: unknown) => void>();
  private lastRequestId = 0;

  constructor(private readonly peer: ShardService) {
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
  }

  /**
   * Stamps the frame's request id (in place) and hands the frame itself to the peer (no copy:
   * it is the link's until the call settles). An answer carrying another id is refused.
   */
  async request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    if (frame.byteLength < FRAME_HEADER_BYTES) throw new RangeError('not an activation frame');
    const requestId = (this.lastRequestId = this.lastRequestId >= 0xffffffff ? 1 : this.lastRequestId + 1);
    stampFrameRequestId(frame, requestId);
    const reply = await this.call(() => this.peer.handleFrame(frame), signal);
    if ('error' in reply) throw errorFromControlMessage(reply.error);
    const answered = frameRequestId(reply.frame);
    if (answered !== requestId) {
      throw new LinkAnswerError(answered === undefined ? `request ${requestId} was answered with ${reply.frame.byteLength} bytes, which are no frame` : `request ${requestId} was answered with the frame of request ${answered}`);
    }
    return reply.frame;
  }

  async control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    const answer = await this.call(() => this.peer.handleControl(message), signal);
    if (answer.kind === 'error') throw errorFromControlMessage(answer);
    return answer;
  }

  async close(reason = 'closed by the head'): Promise<void> {
    if (this.closeReason !== undefined) return;
    this.closeReason = reason;
    const error = new LinkClosedError(reason);
    for (const fail of [...this.pending]) fail(error);
    this.markClosed();
  }

  /**
   * Run one call on the peer. Closing the link or aborting `signal` rejects it at once, even
   * while the peer is still working (its answer is then dropped, as a socket would drop it).
   */
  private async call<T>(work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (this.closeReason !== undefined) throw new LinkClosedError(this.closeReason);
    signal?.throwIfAborted();
    return new Promise<T>((resolve, reject) => {
      const settle = () => {
        this.pending.delete(fail);
        signal?.removeEventListener('abort', onAbort);
      };
      const fail = (error: unknown) => {
        settle();
        reject(error);
      };
      const onAbort = () => fail(signal!.reason);
      this.pending.add(fail);
      signal?.addEventListener('abort', onAbort, { once: true });
      work().then(
        (value) => {
          settle();
          resolve(value);
        },
        (error: unknown) => fail(error),
      );
    });
  }
}
