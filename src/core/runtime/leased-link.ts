/**
 * A session's lease on a shared link: requests go through the shared link, but closing the
 * lease only ends this session's use of it (its in-flight calls reject with LinkClosedError)
 * and leaves the socket to its owner, the mesh. `closed` resolves when either closes.
 */
import type { ControlMessage } from '../../shared/control.ts';
import { untilAborted } from './abort.ts';
import { LinkClosedError, type PeerLink } from './peer-link.ts';

export class LeasedLink implements PeerLink {
  readonly closed: Promise<void>;
  private readonly ended = new AbortController();
  private markClosed!: () => void;

  constructor(private readonly shared: PeerLink) {
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
    void shared.closed.then(() => this.end('the peer link closed'));
  }

  private get isClosed(): boolean {
    return this.ended.signal.aborted;
  }

  request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    return this.guard((s) => this.shared.request(frame, s), signal);
  }

  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    return this.guard((s) => this.shared.control(message, s), signal);
  }

  async close(reason = 'lease closed'): Promise<void> {
    this.end(reason);
  }

  private end(reason: string): void {
    if (this.isClosed) return;
    this.ended.abort(new LinkClosedError(reason));
    this.markClosed();
  }

  private guard<T>(call: (signal?: AbortSignal) => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (this.isClosed) return Promise.reject(this.ended.signal.reason);
    // The caller's signal reaches the shared link (so it can drop the pending request); the
    // lease's end only rejects this lease's calls.
    return untilAborted(call(signal), this.ended.signal);
  }
}
