/**
 * The control messages that set up links rather than run layers: the direct-link handshake
 * (challenge → authenticate → authenticated, protocol 2; peer to peer from 3.2) and the chained
 * route (chain → chained, protocol 3.2). Types only; control.ts parses them with the rest.
 */
import type { LayerRange } from './protocol.ts';

export interface Correlated {
  /** Correlation id: a response carries its request's id. At most 128 characters. */
  readonly id?: string;
}

/**
 * Direct-link handshake (protocol 2): the head dials a peer's listen URL with no secret in
 * the URL or headers; the peer's first message is a `challenge`, the head answers
 * `authenticate` (proof that it holds the join token, bound to both nonces and the peer id),
 * the peer answers `authenticated` (its own proof) and only then serves the socket. Proofs
 * are HMAC-SHA256 (hex); `src/core/peer/direct-auth.ts` computes and checks them.
 */
export interface ChallengeMessage extends Correlated {
  readonly kind: 'challenge';
  /** 32 random bytes, hex. */
  readonly nonce: string;
}
/** Head → peer: answers `challenge`; `nonce` is the head's own, for the peer's proof. */
export interface AuthenticateMessage extends Correlated {
  readonly kind: 'authenticate';
  /** The peer the head means to reach (it joined under this id). */
  readonly peerId: string;
  /** Protocol 3.2: the dialling peer's id on a peer-to-peer link (absent: the head dials); its proof is labelled `hop`. */
  readonly from?: string;
  readonly nonce: string;
  readonly proof: string;
}
/** Peer → head: the head's proof checked; here is the peer's. The link is up. */
export interface AuthenticatedMessage extends Correlated {
  readonly kind: 'authenticated';
  readonly proof: string;
}
/**
 * Head → peer (protocol 3.2, on the head's own link): for `sessionId` on this peer's `range`,
 * accept chain frames only from `from` (`head`, or the previous hop's peer id over a
 * peer-to-peer link) and send the output on to `to` (the next hop: its peer id, range and the
 * URL to dial; no URL: it already holds a link to this peer) — or, without `to`, only to the
 * head. Answered by `chained` once the link to `to` is up, or by `error` (`unauthorized`,
 * `route_unavailable`) when it cannot be made: the head then routes that link through itself.
 */
export interface ChainMessage extends Correlated {
  readonly kind: 'chain';
  readonly sessionId: string;
  readonly range: LayerRange;
  readonly from: string;
  readonly to?: { readonly peerId: string; readonly range: LayerRange; readonly url?: string };
  /**
   * Protocol 3.4: this hop may send the session's outputs as lanes of one frame with other
   * sessions' (kind 8 to `to`, kind 9 to the head). Set only when the head and every peer of
   * the chained segment read lane frames; absent: kinds 6 and 7 only.
   */
  readonly lanes?: boolean;
}
export interface ChainedMessage extends Correlated {
  readonly kind: 'chained';
  readonly sessionId: string;
  readonly range: LayerRange;
}
