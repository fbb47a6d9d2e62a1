/**
 * The dialling end of a direct link's handshake (protocol 2; `from` for a peer dialling the
 * next hop, 3.2), over any opened WebSocket — Node's (node/net/direct-dial.ts) or a browser
 * tab's (browser/browser-chains.ts): answer the listener's `challenge` with proof of the join
 * token, check its proof in return (see direct-auth.ts). Only an authenticated link is handed
 * back; errors never contain a token or a proof.
 */
import { parseControlMessage, serializeControlMessage, type ControlMessage } from '../../shared/control.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { sameToken } from '../../shared/same-token.ts';
import type { LinkSocket } from '../runtime/socket-link.ts';
import { headProof, hopProof, newNonce, peerProof } from './direct-auth.ts';

export interface LinkSink {
  receive(data: string | Uint8Array): void;
  terminated(reason: string): void;
}

/** An open WebSocket: send/close, and a receiver attached later (messages before are queued). */
export interface DialledLink {
  readonly socket: LinkSocket;
  attach(sink: LinkSink): void;
}

export interface HandshakeOptions {
  /** The id of the peer being dialled (bound into both proofs). */
  readonly peerId: string;
  /** The mesh's join token (undefined: it has none). */
  readonly joinToken: string | undefined;
  /** A peer dialling the next hop of a chained route (3.2): its own id. Absent: the head dials. */
  readonly from?: string;
  /** For the handshake (default 10 s). */
  readonly timeoutMs?: number;
}

/** Authenticate `dialled` (opened to `where`, a URL without its query); rejects with ProtocolError('unauthorized') and closes the socket when the other end does not prove the token. */
export async function authenticateDialled(dialled: DialledLink, where: string, options: HandshakeOptions): Promise<DialledLink> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const headNonce = newNonce();
  const after: (string | Uint8Array)[] = [];
  let closedReason: string | undefined;
  let done = false;
  let next: LinkSink | undefined;
  const inbox: (string | Uint8Array)[] = [];
  let wake: (() => void) | undefined;

  dialled.attach({
    receive(data) {
      if (next) return next.receive(data);
      if (done) return void after.push(data);
      inbox.push(data);
      wake?.();
    },
    terminated(reason) {
      closedReason = reason;
      if (next) next.terminated(reason);
      wake?.();
    },
  });

  const nextMessage = async (deadline: number, expected: string): Promise<ControlMessage> => {
    while (inbox.length === 0) {
      if (closedReason !== undefined) throw new ProtocolError('unauthorized', `the peer at ${where} closed the socket before ${expected} (${closedReason})`);
      const left = deadline - Date.now();
      if (left <= 0) throw new ProtocolError('unauthorized', `no ${expected} from ${where} within ${timeoutMs} ms (is a meshnet peer listening there?)`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        wake = () => (clearTimeout(timer), resolve());
      });
      wake = undefined;
    }
    const data = inbox.shift()!;
    if (typeof data !== 'string') throw new ProtocolError('unauthorized', `${where} sent binary data instead of ${expected}`);
    const message = parseControlMessage(data);
    if (message.kind === 'error') throw new ProtocolError('unauthorized', `the peer at ${where} refused the direct link: ${message.message}`);
    if (message.kind !== expected) throw new ProtocolError('unauthorized', `${where} sent '${message.kind}' instead of ${expected}`);
    return message;
  };

  try {
    const deadline = Date.now() + timeoutMs;
    const challenge = await nextMessage(deadline, 'challenge');
    if (challenge.kind !== 'challenge') throw new Error('unreachable');
    const { from } = options;
    const proof = from === undefined ? await headProof(options.joinToken, options.peerId, challenge.nonce, headNonce) : await hopProof(options.joinToken, from, options.peerId, challenge.nonce, headNonce);
    dialled.socket.send(serializeControlMessage({ kind: 'authenticate', id: 'auth', peerId: options.peerId, ...(from !== undefined && { from }), nonce: headNonce, proof }));
    const answer = await nextMessage(deadline, 'authenticated');
    if (answer.kind !== 'authenticated') throw new Error('unreachable');
    const expected = await peerProof(options.joinToken, options.peerId, challenge.nonce, headNonce, from);
    if (!sameToken(answer.proof, expected)) throw new ProtocolError('unauthorized', `the server at ${where} is not peer ${options.peerId} of this mesh (its proof does not match the join token)`);
    done = true;
    if (inbox.length > 0) after.unshift(...inbox.splice(0));
  } catch (error) {
    dialled.socket.close(4001, 'direct link not authenticated');
    throw error instanceof ProtocolError ? error : new ProtocolError('unauthorized', `direct link to ${where}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return {
    socket: dialled.socket,
    attach(sink) {
      for (const data of after.splice(0)) sink.receive(data);
      next = sink;
      if (closedReason !== undefined) sink.terminated(closedReason);
    },
  };
}

/** A URL without its query or fragment, for errors. */
export function urlWithoutQuery(target: string): string {
  const parsed = new URL(target);
  return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
}
