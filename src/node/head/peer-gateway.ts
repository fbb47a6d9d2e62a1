/**
 * The head's `/peer/ws` endpoint: each socket is a relay link. The first message must be a
 * `hello` that passes admission (protocol, join token); the head answers `welcome` and adds
 * the peer to the mesh — over this socket, or, when the peer announced a listen URL and
 * direct links are wanted, over a direct link the head dials: at the host this socket came
 * from (unless `allowPeerHosts` names the announced one), authenticated by a challenge, with
 * no secret in the URL. Refused sockets get an `error` and are closed; nothing a socket
 * sends reaches another peer's state, and no message or log line carries a token.
 */
import { defineWebSocketHandler } from 'h3';
import { admitHello, type AdmissionPolicy } from '../../core/mesh/peer-admission.ts';
import type { Mesh } from '../../core/mesh/mesh.ts';
import type { ChainPort } from '../../core/runtime/chain-port.ts';
import type { PeerLink } from '../../core/runtime/peer-link.ts';
import { SocketLink } from '../../core/runtime/socket-link.ts';
import { parseControlMessage, serializeControlMessage, type HelloMessage } from '../../shared/control.ts';
import { PROTOCOL_VERSION } from '../../shared/protocol.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { directDialTarget } from '../../core/mesh/dial-target.ts';
import { dialDirectPeer } from '../net/direct-dial.ts';

export interface GatewayOptions extends AdmissionPolicy {
  readonly mesh: Mesh;
  /** 'direct': dial peers that listen; 'relay': frames ride the peer's own socket. */
  readonly link: 'direct' | 'relay';
  readonly timeoutMs?: number;
  readonly log?: (line: string) => void;
  /** A holder of a claimed peer id that does not answer a ping within this is replaced (default 3 s). */
  readonly pingTimeoutMs?: number;
  /** Hosts a peer may announce in its listen URL; any other host is replaced by the address it connected from. */
  readonly allowPeerHosts?: readonly string[];
  /** Decorate each admitted peer's link (the bench meters frames and injects delay). */
  readonly wrapLink?: (link: PeerLink, peerId: string) => PeerLink;
  /** Decorate each admitted peer's chain port (the bench injects the same delay on chained frames). */
  readonly wrapChain?: (port: ChainPort, peerId: string) => ChainPort;
}

interface SocketState {
  link?: SocketLink;
  /** Set once the peer is in the mesh. */
  peerId?: string;
  /** Between a valid hello and welcome (or refusal). */
  admitting?: boolean;
}

/** How long a peer id's holder has to answer a ping before a newcomer may take the id. */
export const DEFAULT_PING_TIMEOUT_MS = 3000;

export interface PeerGateway {
  readonly handler: ReturnType<typeof defineWebSocketHandler>;
  /** Close every peer socket (head shutdown). */
  closeAll(reason: string): Promise<void>;
}

export function createPeerGateway(options: GatewayOptions): PeerGateway {
  // Belt and braces: nothing the head writes to a log or sends as an error shows the token,
  // even when a peer put it into what the head quotes (its own listen URL, say).
  const redact = (text: string) => (options.joinToken ? text.replaceAll(options.joinToken, '[join token]') : text);
  const log = (line: string) => options.log?.(redact(line));
  const states = new WeakMap<object, SocketState>();
  const open = new Set<{ close(c?: number, r?: string): void }>();

  // Ids being admitted right now (between hello and addPeer): a second hello for one is refused.
  const joining = new Set<string>();

  async function admit(ws: { send(d: string): void; close(c?: number, r?: string): void }, state: SocketState, hello: HelloMessage, remoteAddress: string | undefined) {
    // A duplicate id: refused while its holder answers a ping; a silent holder is replaced.
    if (await options.mesh.vacate(hello.peerId, options.pingTimeoutMs ?? DEFAULT_PING_TIMEOUT_MS)) {
      log(`peer ${hello.peerId}: its previous connection did not answer a ping; the new connection takes the id over`);
    }
    const relay = new SocketLink({ send: (d) => ws.send(d as string), close: (c, r) => ws.close(c, r) }, { timeoutMs: options.timeoutMs });
    state.link = relay;
    let link: PeerLink = relay;
    let direct: SocketLink | undefined;
    // Where other peers dial this one for chained routes (3.2): the address the head would dial.
    let chainUrl: string | undefined;
    try {
      if (hello.listenUrl) {
        const target = directDialTarget(hello.listenUrl, remoteAddress, options.allowPeerHosts);
        if (target.ok) chainUrl = target.url;
      }
      if (options.link === 'direct' && hello.listenUrl) {
        // The peer picks the port and path; the host is the one it connected from (or allowed).
        const target = directDialTarget(hello.listenUrl, remoteAddress, options.allowPeerHosts);
        if (!target.ok) throw new ProtocolError('protocol_error', `cannot dial peer ${hello.peerId}: ${target.reason}`);
        if (target.dialedHost !== target.announcedHost) {
          log(`peer ${hello.peerId} announced host ${target.announcedHost}; dialling ${target.dialedHost}, where it connected from (--allow-peer-hosts ${target.announcedHost} would allow it)`);
        }
        const dialed = await dialDirectPeer(target.url, { peerId: hello.peerId, joinToken: hello.joinToken });
        const directLink = (direct = new SocketLink(dialed.socket, { timeoutMs: options.timeoutMs }));
        dialed.attach(directLink);
        // The two sockets live and die together: either closing removes the peer.
        void relay.closed.then(() => directLink.close('the peer left'));
        void directLink.closed.then(() => relay.close('the direct link closed'));
        link = directLink;
      }
      const kind = link === relay ? 'relay' : 'direct';
      const chainPort = (direct ?? relay).chain;
      if (options.wrapLink) link = options.wrapLink(link, hello.peerId);
      options.mesh.addPeer({
        id: hello.peerId,
        runtime: hello.runtime,
        executionProvider: hello.executionProvider,
        memoryBudgetBytes: hello.memoryBudgetBytes,
        weightFormats: hello.weightFormats,
        link,
        listenUrl: hello.listenUrl,
        protocol: hello.protocol,
        ...(hello.rejoin && { connectionsBefore: hello.rejoin.connections }),
        // The mesh chains through it only if its hello announced 3.2 (CHAIN_MINOR).
        chain: { port: options.wrapChain?.(chainPort, hello.peerId) ?? chainPort, ...(chainUrl !== undefined && { url: chainUrl }) },
      });
      state.peerId = hello.peerId;
      ws.send(serializeControlMessage({ kind: 'welcome', id: hello.id, peerId: hello.peerId, protocol: PROTOCOL_VERSION }));
      log(`peer ${hello.peerId} joined (${hello.runtime}, ${hello.executionProvider}, ${kind} link${hello.rejoin ? `, rejoining after ${hello.rejoin.connections} earlier head connection(s)` : ''})`);
    } catch (error) {
      // The direct socket goes now; the relay socket is closed by the caller after the error.
      void direct?.close('not admitted');
      throw error;
    }
  }

  const handler = defineWebSocketHandler({
    open(peer) {
      states.set(peer, {});
      open.add(peer);
    },
    async message(peer, message) {
      const state = states.get(peer) ?? {};
      const raw = message.rawData as unknown;
      const data = typeof raw === 'string' ? raw : message.uint8Array();
      if (state.link) {
        state.link.receive(data);
        return;
      }
      if (state.admitting) {
        peer.send(serializeControlMessage({ kind: 'error', code: 'protocol_error', message: 'wait for welcome before sending more' }));
        return;
      }
      let claimed: string | undefined;
      try {
        if (typeof data !== 'string') throw new ProtocolError('protocol_error', 'the first message must be a text hello');
        const remoteAddress = (peer as { remoteAddress?: string }).remoteAddress;
        const admission = admitHello(parseControlMessage(data), options, remoteAddress);
        if (!admission.ok) {
          peer.send(serializeControlMessage(admission.error));
          peer.close(4001, admission.error.code);
          log(`refused a peer: ${admission.error.message}`);
          return;
        }
        const id = admission.hello.peerId;
        if (joining.has(id)) throw new ProtocolError('peer_id_taken', `peer id '${id}' is joining from another connection right now`);
        joining.add((claimed = id));
        state.admitting = true;
        await admit(peer, state, admission.hello, remoteAddress);
      } catch (error) {
        const code = error instanceof ProtocolError ? error.code : 'internal';
        const text = redact(error instanceof Error ? error.message : String(error)).slice(0, 2048);
        peer.send(serializeControlMessage({ kind: 'error', code, message: text }));
        peer.close(4002, code);
        log(`refused a peer: ${text}`);
      } finally {
        state.admitting = false;
        if (claimed !== undefined) joining.delete(claimed);
      }
    },
    close(peer, details) {
      open.delete(peer);
      const state = states.get(peer);
      state?.link?.terminated(`relay socket closed (${details.code ?? ''})`);
      if (state?.peerId) log(`peer ${state.peerId} left`);
    },
    error(peer) {
      states.get(peer)?.link?.terminated('relay socket error');
    },
  });
  return {
    handler,
    async closeAll(reason) {
      for (const socket of open) socket.close(1001, reason);
      open.clear();
    },
  };
}
