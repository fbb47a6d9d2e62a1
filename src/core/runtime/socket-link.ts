/**
 * PeerLink over a message socket (WebSocket): binary messages are activation frames,
 * text messages are JSON control messages. Used for direct links (the head dialed the
 * peer) and relay links (the peer dialed the head) alike; the runtime adapter feeds
 * incoming messages to `receive` and a dropped socket to `terminated`.
 */
import { errorFromControlMessage } from '../../shared/control-errors.ts';
import { parseControlMessage, serializeControlMessage, type ControlMessage } from '../../shared/control.ts';
import { FRAME_HEADER_BYTES, FRAME_KIND_CODES, FRAME_OFFSETS, frameRequestId, LANE_FRAME_KIND_CODES, stampFrameRequestId } from '../../shared/frame-layout.ts';
import { CHAIN_REPORT_ID, type ChainListener, type ChainPort } from './chain-port.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { LinkClosedError, LinkTimeoutError, type PeerLink } from './peer-link.ts';
import { hopMark } from './hop-trace.ts';
import { systemClock, type Clock } from './clock.ts';
import { DeadlineSweep, type SweptDeadline } from './deadline-sweep.ts';

/** The least a socket must do. Binary data is sent for Uint8Array, text for strings. */
/** Copy-lanes frames (protocol 3.4) go to the chain listeners too; ChainInbox splits them. */
const COPY_LANES_KIND = LANE_FRAME_KIND_CODES['copy-lanes'];

export interface LinkSocket {
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
}

export interface SocketLinkOptions {
  /** A frame or control request with no answer after this long rejects with LinkTimeoutError. */
  readonly timeoutMs?: number;
  /** Called for messages that cannot be parsed (the link stays up; nothing is answered). */
  readonly onProtocolError?: (error: ProtocolError) => void;
  /** Called for messages that answer nothing (stats or errors a peer sends on its own). */
  readonly onUnprompted?: (message: ControlMessage) => void;
}

interface Pending<T> {
  resolve(value: T): void;
  reject(error: unknown): void;
  cleanup(): void;
}

/**
 * The clock of request timeouts: monotonic time and the system clock's timers, which keep no
 * process alive (the Clock contract). A pending request is held open by its socket, not by its
 * timeout; and the sweep's idle timer (it may hold no deadline: see DeadlineSweep) must not keep
 * a process with an open link alive until it fires, up to `timeoutMs` after the last answer.
 */
const linkTimeClock: Clock = { now: () => performance.now(), setTimeout: systemClock.setTimeout };

/**
 * One request or control call waiting for its answer: settles once, then leaves its table,
 * its timeout and the caller's signal (it is the abort listener itself: no closures per call).
 */
class PendingCall<K, T> implements Pending<T>, SweptDeadline {
  due = 0;
  graceMs = 0;
  private settled = false;

  constructor(
    private readonly table: Map<K, Pending<T>>,
    private readonly key: K,
    private readonly signal: AbortSignal | undefined,
    private readonly onValue: (value: T) => void,
    private readonly onError: (error: unknown) => void,
    private readonly sweep: DeadlineSweep | undefined,
    private readonly what: string,
    private readonly timeoutMs: number | undefined,
  ) {
    signal?.addEventListener('abort', this, { once: true });
    if (sweep !== undefined) {
      this.due = linkTimeClock.now() + timeoutMs!;
      sweep.add(this);
    }
  }

  resolve(value: T): void {
    this.cleanup();
    this.onValue(value);
  }

  reject(error: unknown): void {
    this.cleanup();
    this.onError(error);
  }

  cleanup(): void {
    if (this.settled) return;
    this.settled = true;
    this.sweep?.delete(this);
    this.signal?.removeEventListener('abort', this);
    this.table.delete(this.key);
  }

  /** The timeout passed. */
  expire(): void {
    this.reject(new LinkTimeoutError(this.what, this.timeoutMs!));
  }

  /** The caller's signal aborted. */
  handleEvent(): void {
    this.reject(this.signal!.reason);
  }
}

export class SocketLink implements PeerLink {
  readonly closed: Promise<void>;
  private markClosed!: () => void;
  private closeReason: string | undefined;
  private readonly frames = new Map<number, Pending<Uint8Array>>();
  private readonly controls = new Map<string, Pending<ControlMessage>>();
  private nextControlId = 1;
  private lastRequestId = 0;
  private readonly chainListeners = new Set<ChainListener>();
  private sweep: DeadlineSweep | undefined;
  /**
   * The same socket as a ChainPort (protocol 3.2): chain frames posted as they are, copy
   * frames (kind 7; kind 9, copy-lanes, from 3.4) and chain reports (`error` with id `chain`) heard apart from the
   * request/answer pairing (they answer no request of this link's).
   */
  readonly chain: ChainPort = {
    post: (frame) => {
      if (this.isClosed) throw new LinkClosedError(this.closeReason!);
      this.socket.send(frame);
    },
    listen: (listener) => {
      this.chainListeners.add(listener);
      return () => this.chainListeners.delete(listener);
    },
  };

  constructor(
    private readonly socket: LinkSocket,
    private readonly options: SocketLinkOptions = {},
  ) {
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
  }

  get isClosed(): boolean {
    return this.closeReason !== undefined;
  }

  /** Stamps the frame's request id (in place) with one not in flight on this link, and pairs the answer by it. */
  request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    if (frame.byteLength < FRAME_HEADER_BYTES) return Promise.reject(new RangeError('not an activation frame'));
    const requestId = this.nextRequestId();
    stampFrameRequestId(frame, requestId);
    return this.track(this.frames, requestId, `frame request ${requestId}`, signal, () => {
      hopMark('head.ws.send');
      this.socket.send(frame);
      hopMark('head.ws.sent');
    });
  }

  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    const id = message.id ?? `h${this.nextControlId++}`;
    const text = serializeControlMessage({ ...message, id });
    return this.track(this.controls, id, `'${message.kind}' message`, signal, () => this.socket.send(text));
  }

  /** u32 ids, wrapping, skipping any still in flight. */
  private nextRequestId(): number {
    do this.lastRequestId = this.lastRequestId >= 0xffffffff ? 1 : this.lastRequestId + 1;
    while (this.frames.has(this.lastRequestId));
    return this.lastRequestId;
  }

  /** Send a message that expects no answer (replies to the other side's requests, hello). */
  notify(message: ControlMessage): void {
    if (this.isClosed) return;
    this.socket.send(serializeControlMessage(message));
  }

  /** Feed one incoming socket message. */
  receive(data: string | Uint8Array): void {
    if (this.isClosed) return;
    if (typeof data !== 'string') {
      if (data.byteLength >= FRAME_HEADER_BYTES && (data[FRAME_OFFSETS.kind] === FRAME_KIND_CODES.copy || data[FRAME_OFFSETS.kind] === COPY_LANES_KIND)) {
        for (const listener of [...this.chainListeners]) listener.copy(data);
        return;
      }
      hopMark('head.ws.recv');
      const requestId = frameRequestId(data);
      if (requestId === undefined) {
        this.options.onProtocolError?.(new ProtocolError('bad_frame', `a ${data.byteLength}-byte binary message is not a frame`));
        return;
      }
      // An answer for no pending request (a late one, another request's, garbage) is dropped:
      // the request it should have answered runs into its deadline.
      const pending = this.frames.get(requestId);
      if (pending) pending.resolve(data);
      else this.options.onProtocolError?.(new ProtocolError('bad_frame', `result for request ${requestId}, which is not pending`));
      return;
    }
    let message: ControlMessage;
    try {
      message = parseControlMessage(data);
    } catch (error) {
      if (error instanceof ProtocolError) this.options.onProtocolError?.(error);
      return;
    }
    if (message.kind === 'error' && message.id === CHAIN_REPORT_ID) {
      for (const listener of [...this.chainListeners]) listener.report(message);
      return;
    }
    if (message.kind === 'error' && message.requestId !== undefined && this.frames.has(message.requestId)) {
      this.frames.get(message.requestId)!.reject(errorFromControlMessage(message));
      return;
    }
    const pending = message.id !== undefined ? this.controls.get(message.id) : undefined;
    if (pending) {
      if (message.kind === 'error') pending.reject(errorFromControlMessage(message));
      else pending.resolve(message);
      return;
    }
    this.options.onUnprompted?.(message);
  }

  /** The socket is gone (closed by the other side or broken). */
  terminated(reason: string): void {
    this.shutdown(reason);
  }

  async close(reason = 'closed by this side'): Promise<void> {
    if (this.isClosed) return;
    this.shutdown(reason);
    try {
      this.socket.close(1000, reason.slice(0, 120));
    } catch {
      // Already closing: nothing left to free.
    }
  }

  private shutdown(reason: string): void {
    if (this.isClosed) return;
    this.closeReason = reason;
    const error = new LinkClosedError(reason);
    for (const pending of [...this.frames.values(), ...this.controls.values()]) pending.reject(error);
    this.sweep?.stop();
    this.markClosed();
  }

  private track<K, T>(table: Map<K, Pending<T>>, key: K, what: string, signal: AbortSignal | undefined, send: () => void): Promise<T> {
    if (this.isClosed) return Promise.reject(new LinkClosedError(this.closeReason!));
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<T>((resolve, reject) => {
      const { timeoutMs } = this.options;
      const pending = new PendingCall(table, key, signal, resolve, reject, timeoutMs === undefined ? undefined : this.timeouts, what, timeoutMs);
      table.set(key, pending);
      try {
        send();
      } catch (error) {
        pending.reject(new LinkClosedError(`send failed: ${error instanceof Error ? error.message : String(error)}`));
      }
    });
  }

  /** The link's request timeouts (`timeoutMs`): one sweep, not a timer per request. */
  private get timeouts(): DeadlineSweep {
    return (this.sweep ??= new DeadlineSweep(linkTimeClock));
  }
}
