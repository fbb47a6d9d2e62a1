/**
 * Authenticating a direct link without a secret on the wire (protocol 2). The head dials the
 * peer's listen URL with nothing secret in the URL or headers; on that socket:
 *
 *   peer → head  challenge      { nonce: Np }
 *   head → peer  authenticate   { peerId, nonce: Nh, proof: HMAC(K, "head" | peerId | Np | Nh) }
 *   peer → head  authenticated  { proof: HMAC(K, "peer" | peerId | Np | Nh) }
 *
 * K is derived from the join token the peer joined with (a fixed public key when it joined
 * without one: such a mesh is open, and so is its direct listener). Both proofs cover both
 * fresh nonces, so neither can be replayed on another connection, and their labels differ, so
 * a proof cannot be reflected back. A server that is not the peer (anything else listening
 * at that port) cannot answer, and a dialer that is not the head is closed before it can send
 * a frame. Why a challenge rather than the token in a header: a header would still hand the
 * token to whatever listens at the announced port; a proof is useless to it.
 *
 * A peer dialling another peer for a chained route (protocol 3.2) runs the same handshake
 * and names itself in `authenticate.from`; its proof is labelled `hop` and binds its id, and
 * the peer's answer binds it too, so the listener knows which peer sent each frame after it.
 *
 * Uses WebCrypto (`crypto.subtle`, global in Node ≥ 20 and browsers), so it stays in core.
 */
import type { ControlMessage } from '../../shared/control.ts';
import { parseControlMessage, serializeControlMessage } from '../../shared/control.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { sameToken } from '../../shared/same-token.ts';
import type { LinkSocket } from '../runtime/socket-link.ts';

const encoder = new TextEncoder();
const hex = (bytes: ArrayBuffer | Uint8Array) => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');

/** 32 random bytes as 64 hex digits. */
export function newNonce(): string {
  return hex(crypto.getRandomValues(new Uint8Array(32)));
}

async function proof(label: 'head' | 'peer' | 'hop', joinToken: string | undefined, peerId: string, peerNonce: string, headNonce: string, from?: string): Promise<string> {
  // The key is never empty (WebCrypto refuses empty HMAC keys); without a token it is public.
  const key = await crypto.subtle.importKey('raw', encoder.encode(`meshnet direct link key\n${joinToken ?? ''}`), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  // A peer-to-peer link (3.2) binds the dialler's id too; a head's link signs what 2.0 signed.
  const dialler = from === undefined ? '' : `\nfrom ${from}`;
  return hex(await crypto.subtle.sign('HMAC', key, encoder.encode(`meshnet direct link v2\n${label}\n${peerId}\n${peerNonce}\n${headNonce}${dialler}`)));
}

/** The head's proof, sent in `authenticate`. */
export const headProof = (joinToken: string | undefined, peerId: string, peerNonce: string, headNonce: string) => proof('head', joinToken, peerId, peerNonce, headNonce);
/** A dialling peer's proof (protocol 3.2, `authenticate.from`): label `hop`, its own id bound in. */
export const hopProof = (joinToken: string | undefined, from: string, peerId: string, peerNonce: string, headNonce: string) => proof('hop', joinToken, peerId, peerNonce, headNonce, from);
/** The peer's proof, sent in `authenticated` (to a dialling peer `from`, when one dialled). */
export const peerProof = (joinToken: string | undefined, peerId: string, peerNonce: string, headNonce: string, from?: string) => proof('peer', joinToken, peerId, peerNonce, headNonce, from);

export interface DirectLinkGuardOptions {
  /** The id this peer joined under; a head that means another peer is refused. */
  readonly peerId: string;
  readonly joinToken: string | undefined;
  readonly socket: LinkSocket;
  /** Close a dialer that has not authenticated after this long (default 10 s). */
  readonly timeoutMs?: number;
  /**
   * Whether another peer may dial in (protocol 3.2, for chained routes): its `authenticate`
   * names itself in `from`. Default false: only the head.
   */
  readonly acceptPeers?: boolean;
  /** Called once the dialer proved the token, before the peer's answer is sent: `from` is the dialling peer's id, absent for the head. */
  readonly onAccepted: (from?: string) => void;
  /** Called once when the dialer is refused (the socket is being closed). */
  readonly onRefused?: (reason: string) => void;
}

/**
 * The peer's end of one incoming direct connection until it is authenticated. `open()` sends
 * the challenge; feed every message to `receive` until `accepted` is true (then hand the
 * socket to a PeerEndpoint). Anything else than one valid `authenticate` closes the socket
 * with 4001. Owns its timer; `terminated()` clears it.
 */
export class DirectLinkGuard {
  private readonly nonce = newNonce();
  private state: 'new' | 'waiting' | 'checking' | 'accepted' | 'refused' = 'new';
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly options: DirectLinkGuardOptions) {}

  get accepted(): boolean {
    return this.state === 'accepted';
  }

  open(): void {
    if (this.state !== 'new') return;
    this.state = 'waiting';
    this.timer = setTimeout(() => this.refuse(`no authenticate within ${this.options.timeoutMs ?? 10_000} ms`), this.options.timeoutMs ?? 10_000);
    this.send({ kind: 'challenge', nonce: this.nonce });
  }

  async receive(data: string | Uint8Array): Promise<void> {
    if (this.state !== 'waiting') {
      if (this.state === 'checking') this.refuse('a message arrived before the handshake finished');
      return;
    }
    let message: ControlMessage;
    try {
      if (typeof data !== 'string') throw new ProtocolError('unauthorized', 'a direct link must authenticate before sending frames');
      message = parseControlMessage(data);
    } catch (error) {
      return this.refuse(error instanceof Error ? error.message : String(error));
    }
    if (message.kind !== 'authenticate') return this.refuse(`the first message must be 'authenticate', got '${message.kind}'`);
    if (message.peerId !== this.options.peerId) return this.refuse(`this is peer ${this.options.peerId}, not ${message.peerId}`);
    const { from } = message;
    if (from !== undefined && !this.options.acceptPeers) return this.refuse('this listener takes no links from other peers');
    if (from === this.options.peerId || from === 'head') return this.refuse(`a peer cannot dial in as ${from}`);
    this.state = 'checking';
    const { joinToken, peerId } = this.options;
    const expected = from === undefined ? await headProof(joinToken, peerId, this.nonce, message.nonce) : await hopProof(joinToken, from, peerId, this.nonce, message.nonce);
    if (this.state !== 'checking') return; // closed meanwhile
    if (!sameToken(message.proof, expected)) return this.refuse('the proof does not match this mesh\u2019s join token');
    const answer = await peerProof(joinToken, peerId, this.nonce, message.nonce, from);
    if (this.state !== 'checking') return;
    this.state = 'accepted';
    clearTimeout(this.timer);
    this.options.onAccepted(from);
    this.send({ kind: 'authenticated', id: message.id, proof: answer });
  }

  /** The socket is gone. */
  terminated(): void {
    clearTimeout(this.timer);
    if (this.state !== 'accepted') this.state = 'refused';
  }

  private refuse(reason: string): void {
    if (this.state === 'refused' || this.state === 'accepted') return;
    this.state = 'refused';
    clearTimeout(this.timer);
    // The reason names what was wrong, never a token or proof.
    this.send({ kind: 'error', code: 'unauthorized', message: `direct link refused: ${reason.slice(0, 512)}` });
    this.options.socket.close(4001, 'unauthorized');
    this.options.onRefused?.(reason);
  }

  private send(message: ControlMessage): void {
    this.options.socket.send(serializeControlMessage(message));
  }
}
