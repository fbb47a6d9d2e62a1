/**
 * The PeerLink seam: how the head reaches one peer. In-process, direct (the head dialed the
 * peer's WebSocket server) and relay (the peer dialed the head's /peer/ws) links all look
 * the same to a Route Session. One conformance suite (test/suites/peer-link.suite.ts) runs
 * against every implementation.
 *
 * Contract:
 * - `request(frame)` sends one activation frame and resolves with the peer's result frame
 *   (the bytes it sent). The link stamps the frame's request id in place (its own ids, unique
 *   among its requests in flight, so sessions sharing a socket never collide) and pairs the
 *   answer by it; the frame is the link's until the call settles. A peer's refusal rejects
 *   with the typed `ProtocolError` it reported (e.g. code 'cache_miss'); an answer that is not
 *   for this request with `LinkAnswerError` (or, on a socket, is dropped); a dropped link with
 *   `LinkClosedError`, a peer that does not answer in time with `LinkTimeoutError`, an aborted
 *   signal with its reason.
 * - `control(message)` sends a control message and resolves with the correlated answer;
 *   an `error` answer rejects as a `ProtocolError`.
 * - `close()` is idempotent; afterwards every pending and new call rejects with
 *   `LinkClosedError`. `closed` resolves when the link is closed by either side.
 * The link owns its socket and timers; whoever opened the link closes it.
 */
import type { ControlMessage } from '../../shared/control.ts';

export interface PeerLink {
  request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array>;
  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage>;
  close(reason?: string): Promise<void>;
  readonly closed: Promise<void>;
}

export class LinkClosedError extends Error {
  override readonly name = 'LinkClosedError';
  constructor(reason: string) {
    super(`link closed: ${reason}`);
  }
}

export class LinkTimeoutError extends Error {
  override readonly name = 'LinkTimeoutError';
  constructor(what: string, ms: number) {
    super(`${what} got no answer within ${ms} ms`);
  }
}

/**
 * The peer answered with something that is not the answer to this request: a frame for
 * another request, or bytes that are no frame at all. The peer is at fault.
 */
export class LinkAnswerError extends Error {
  override readonly name = 'LinkAnswerError';
}
