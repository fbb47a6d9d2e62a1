/**
 * The chained-route seams (protocol 3.2). The head reaches each hop's peer through a
 * `ChainPort` besides its PeerLink: it posts chain frames (the first hop of a segment) and
 * hears every copy and chain error that peer reports. A peer reaches the next hop through a
 * `HopOutlet` that its `HopDialer` opened to the address the head named. In-process, socket
 * and browser implementations all keep the same contract:
 *
 * - `post(frame)` hands the frame over (the port may keep it) and returns at once; whatever
 *   becomes of it is heard as a copy or a report, or not at all (the head's deadline).
 * - `listen(listener)` hears every copy frame (kind 7) and every chain error the peer sends,
 *   until the returned function is called.
 * - `HopOutlet.send(frame)` hands a chain frame to the next hop; it throws when the link is
 *   closed (the sender then reports `route_unavailable` to the head).
 */
import type { ErrorMessage } from '../../shared/control.ts';

/** The correlation id a peer puts on the `error` reports of chained frames: they answer no request of the head's link. */
export const CHAIN_REPORT_ID = 'chain';

export interface ChainListener {
  /** A hop's output: a copy frame carrying the chain step's request id, the hop's range and start. */
  copy(frame: Uint8Array): void;
  /** A hop refused or failed a chain frame (its session and request id). */
  report(error: ErrorMessage): void;
}

export interface ChainPort {
  post(frame: Uint8Array): void;
  listen(listener: ChainListener): () => void;
}

export interface HopOutlet {
  send(frame: Uint8Array): void;
  /** True once the link is gone: the next `chain` naming that hop dials it again. */
  readonly closed?: boolean;
}

export interface HopDialer {
  /**
   * An authenticated link from this peer to `to` (dialled at `to.url`, or one already open to
   * that peer), reused by every session. Rejects when it cannot be made.
   */
  outlet(to: { readonly peerId: string; readonly url?: string }): Promise<HopOutlet>;
}
