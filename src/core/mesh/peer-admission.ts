/**
 * Admitting a peer at `hello`: a peer id other than the reserved 'head', protocol major
 * version and join token. Pure; the gateway
 * sends the resulting `welcome` or `error` and closes refused sockets.
 */
import type { ControlMessage, ErrorMessage, HelloMessage } from '../../shared/control.ts';
import { isCompatibleVersion, PROTOCOL_VERSION } from '../../shared/protocol.ts';
import { sameToken } from '../../shared/same-token.ts';
import { HEAD_PEER_ID } from './plan-route.ts';

export interface AdmissionPolicy {
  /** The mesh's join token; undefined admits peers without one. */
  readonly joinToken?: string;
  /**
   * Admit peers on the head's own machine without a token (the head generated its token and
   * nobody was told it: local browser tabs may join). A wrong token is still refused.
   */
  readonly allowLoopbackWithoutToken?: boolean;
}

/** 127.0.0.0/8, ::1 and their IPv4-mapped forms. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return v4.startsWith('127.') || address === '::1';
}

export type Admission = { readonly ok: true; readonly hello: HelloMessage } | { readonly ok: false; readonly error: ErrorMessage };

export { sameToken } from '../../shared/same-token.ts';

export function admitHello(message: ControlMessage, policy: AdmissionPolicy, remoteAddress?: string): Admission {
  const refuse = (code: ErrorMessage['code'], text: string): Admission => ({ ok: false, error: { kind: 'error', id: message.id, code, message: text } });
  if (message.kind !== 'hello') return refuse('protocol_error', `the first message must be 'hello', got '${message.kind}'`);
  // 'head' (in any case) names the head's own layers in the mesh, routes and the dashboard.
  if (message.peerId.toLowerCase() === HEAD_PEER_ID) {
    return refuse('peer_id_taken', `the peer id '${message.peerId}' is reserved for the head itself: start the peer with another --peer-id`);
  }
  if (!isCompatibleVersion(message.protocol)) {
    return refuse('version_mismatch', `protocol ${message.protocol.major}.${message.protocol.minor} is not compatible with the head's ${PROTOCOL_VERSION.major}.${PROTOCOL_VERSION.minor}`);
  }
  if (policy.joinToken !== undefined) {
    if (message.joinToken === undefined) {
      if (policy.allowLoopbackWithoutToken && isLoopbackAddress(remoteAddress)) return { ok: true, hello: message };
      return refuse('unauthorized', 'this mesh needs a join token: start the peer with --join-token (the head prints it)');
    }
    if (!sameToken(message.joinToken, policy.joinToken)) return refuse('unauthorized', 'the join token is wrong');
  }
  return { ok: true, hello: message };
}
