/**
 * The head's end of a direct link (protocol 2): dial the peer's listen URL — nothing secret
 * in the URL or headers — and run the handshake of `core/peer/direct-auth.ts`: answer the
 * peer's `challenge` with proof of the join token, and check the peer's proof in return.
 * Only an authenticated socket is handed back; errors never contain a token or a proof.
 */
import { headProof, hopProof, newNonce, peerProof } from '../../core/peer/direct-auth.ts';
import { sameToken } from '../../core/mesh/peer-admission.ts';
import { parseControlMessage, serializeControlMessage, type ControlMessage } from '../../shared/control.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { dialSocket, type DialedSocket, type SocketSink } from './ws-dial.ts';

export interface DirectDialOptions {
  /** The id the peer joined under (bound into both proofs). */
  readonly peerId: string;
  /** The token the peer joined with (undefined: it joined without one). */
  readonly joinToken: string | undefined;
  /** A peer dialling the next hop of a chained route (protocol 3.2): its own id, sent as `authenticate.from`. Absent: the head dials. */
  readonly from?: string;
  /** For connecting, and again for the handshake (default 10 s each). */
  readonly timeoutMs?: number;
}

/** Dial `url` and authenticate the link; rejects with a ProtocolError('unauthorized') when the other end does not prove the token. */
export async function dialDirectPeer(target: string, options: DirectDialOptions): Promise<DialedSocket> {
  const url = target;
  // Errors name the listener without its query (the peer's to fill; never worth repeating).
  const parsed = new URL(target);
  const where = `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const dialed = await dialSocket(url, timeoutMs).catch((error: unknown) => {
    throw new ProtocolError('unauthorized', `${(error instanceof Error ? error.message : String(error)).replaceAll(url, where)} (the listener peer ${options.peerId} announced)`);
  });
  const headNonce = newNonce();
  const after: (string | Uint8Array)[] = [];
  let closedReason: string | undefined;
  let done = false;
  let next: SocketSink | undefined;
  const inbox: (string | Uint8Array)[] = [];
  let wake: (() => void) | undefined;

  dialed.attach({
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
    dialed.socket.send(serializeControlMessage({ kind: 'authenticate', id: 'auth', peerId: options.peerId, ...(from !== undefined && { from }), nonce: headNonce, proof }));
    const answer = await nextMessage(deadline, 'authenticated');
    if (answer.kind !== 'authenticated') throw new Error('unreachable');
    const expected = await peerProof(options.joinToken, options.peerId, challenge.nonce, headNonce, from);
    if (!sameToken(answer.proof, expected)) throw new ProtocolError('unauthorized', `the server at ${where} is not peer ${options.peerId} of this mesh (its proof does not match the join token)`);
    done = true;
    if (inbox.length > 0) after.unshift(...inbox.splice(0));
  } catch (error) {
    dialed.socket.close(4001, 'direct link not authenticated');
    throw error instanceof ProtocolError ? error : new ProtocolError('unauthorized', `direct link to ${where}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return {
    socket: dialed.socket,
    attach(sink) {
      for (const data of after.splice(0)) sink.receive(data);
      next = sink;
      if (closedReason !== undefined) sink.terminated(closedReason);
    },
  };
}
