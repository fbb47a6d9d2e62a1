/**
 * The head's end of a direct link (protocol 2), and a Node peer's link to the next hop of a
 * chained route (3.2): dial the listen URL — nothing secret in the URL or headers — and run
 * the dialling end of the handshake (`core/peer/direct-handshake.ts`, shared with browser
 * tabs). Only an authenticated socket is handed back; errors never contain a token or a proof.
 */
import { authenticateDialled, urlWithoutQuery, type HandshakeOptions } from '../../core/peer/direct-handshake.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { dialSocket, type DialedSocket } from './ws-dial.ts';

export interface DirectDialOptions extends HandshakeOptions {
  /** For connecting, and again for the handshake (default 10 s each). */
  readonly timeoutMs?: number;
}

/** Dial `url` and authenticate the link; rejects with a ProtocolError('unauthorized') when the other end does not prove the token. */
export async function dialDirectPeer(target: string, options: DirectDialOptions): Promise<DialedSocket> {
  // Errors name the listener without its query (the peer's to fill; never worth repeating).
  const where = urlWithoutQuery(target);
  const dialed = await dialSocket(target, options.timeoutMs ?? 10_000).catch((error: unknown) => {
    throw new ProtocolError('unauthorized', `${(error instanceof Error ? error.message : String(error)).replaceAll(target, where)} (the listener peer ${options.peerId} announced)`);
  });
  return authenticateDialled(dialed, where, options);
}
