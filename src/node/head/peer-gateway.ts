/**
 * The head's `/peer/ws` endpoint: each socket is a relay link. The first message must be a
 * `hello` that passes admission (protocol, join token); the head answers `welcome` and adds
 * the peer to the mesh — over this socket, or, when the peer announced a listen URL and
 * direct links are wanted, over a direct link the head dials. Refused sockets get an
 * `error` and are closed; nothing a socket sends reaches another peer's state.
 */
import { defineWebSocketHandler } from 'h3';
import { admitHello, type AdmissionPolicy } from '../../core/route/peer-admission.ts';
import type { Mesh } from '../../core/route/mesh.ts';
import type { PeerLink } from '../../core/runtime/peer-link.ts';
import { SocketLink } from '../../core/runtime/socket-link.ts';
import { parseControlMessage, serializeControlMessage, type HelloMessage } from '../../shared/control.ts';
import { PROTOCOL_VERSION } from '../../shared/protocol.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { dialSocket } from '../net/ws-dial.ts';

export interface GatewayOptions extends AdmissionPolicy {
  readonly mesh: Mesh;
  /** 'direct': dial peers that listen; 'relay': frames ride the peer's own socket. */
  readonly link: 'direct' | 'relay';
  readonly timeoutMs?: number;
  readonly log?: (line: string) => void;
  /** Decorate each admitted peer's link (the bench meters frames and injects delay). */
  readonly wrapLink?: (link: PeerLink, peerId: string) => PeerLink;
}

interface SocketState {
  link?: SocketLink;
  peerId?: string;
}

export interface PeerGateway {
  readonly handler: ReturnType<typeof defineWebSocketHandler>;
  /** Close every peer socket (head shutdown). */
  closeAll(reason: string): Promise<void>;
}

export function createPeerGateway(options: GatewayOptions): PeerGateway {
  const log = options.log ?? (() => {});
  const states = new WeakMap<object, SocketState>();
  const open = new Set<{ close(c?: number, r?: string): void }>();

  async function admit(ws: { send(d: string): void; close(c?: number, r?: string): void }, state: SocketState, hello: HelloMessage) {
    const relay = new SocketLink({ send: (d) => ws.send(d as string), close: (c, r) => ws.close(c, r) }, { timeoutMs: options.timeoutMs });
    state.link = relay;
    state.peerId = hello.peerId;
    let link: PeerLink = relay;
    if (options.link === 'direct' && hello.listenUrl) {
      const url = new URL(hello.listenUrl);
      if (options.joinToken) url.searchParams.set('token', options.joinToken);
      const dialed = await dialSocket(url.toString());
      const direct = new SocketLink(dialed.socket, { timeoutMs: options.timeoutMs });
      dialed.attach(direct);
      // The two sockets live and die together: either closing removes the peer.
      void relay.closed.then(() => direct.close('the peer left'));
      void direct.closed.then(() => relay.close('the direct link closed'));
      link = direct;
    }
    const kind = link === relay ? 'relay' : 'direct';
    if (options.wrapLink) link = options.wrapLink(link, hello.peerId);
    ws.send(serializeControlMessage({ kind: 'welcome', id: hello.id, peerId: hello.peerId, protocol: PROTOCOL_VERSION }));
    options.mesh.addPeer({
      id: hello.peerId,
      runtime: hello.runtime,
      executionProvider: hello.executionProvider,
      memoryBudgetBytes: hello.memoryBudgetBytes,
      weightFormats: hello.weightFormats,
      link,
      listenUrl: hello.listenUrl,
    });
    log(`peer ${hello.peerId} joined (${hello.runtime}, ${hello.executionProvider}, ${kind} link)`);
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
      try {
        if (typeof data !== 'string') throw new ProtocolError('protocol_error', 'the first message must be a text hello');
        const admission = admitHello(parseControlMessage(data), options, (peer as { remoteAddress?: string }).remoteAddress);
        if (!admission.ok) {
          peer.send(serializeControlMessage(admission.error));
          peer.close(4001, admission.error.code);
          log(`refused a peer: ${admission.error.message}`);
          return;
        }
        await admit(peer, state, admission.hello);
      } catch (error) {
        const code = error instanceof ProtocolError ? error.code : 'internal';
        peer.send(serializeControlMessage({ kind: 'error', code, message: error instanceof Error ? error.message : String(error) }));
        peer.close(4002, code);
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
