/**
 * Real sockets on loopback for transport tests: a head (startHead) over stories260k, a
 * minimal direct peer server (crossws + PeerEndpoint, as a Node peer's --listen runs), and
 * a raw WebSocket client that sends exactly the bytes a test gives it.
 */
import { H3, defineWebSocketHandler } from 'h3';
import { PeerEndpoint } from '../../src/core/peer/peer-endpoint.ts';
import type { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import type { ControlMessage } from '../../src/shared/control.ts';
import { startHead, type HeadOptions, type RunningHead } from '../../src/node/head/head-node.ts';
import { startServer } from '../../src/node/net/start-server.ts';
import { dialSocket, type DialedSocket } from '../../src/node/net/ws-dial.ts';
import { dialDirectPeer, type DirectDialOptions } from '../../src/node/net/direct-dial.ts';
import type { StoriesContext } from '../route/route-harness.ts';

export const JOIN_TOKEN = 'transport-test-token';

export function startStoriesHead(ctx: StoriesContext, link: 'relay' | 'direct', extra: Partial<HeadOptions> = {}): Promise<RunningHead> {
  return startHead({
    model: ctx.model,
    tokenizer: ctx.tokenizer,
    name: 'stories260k',
    port: 0,
    host: '127.0.0.1',
    joinToken: JOIN_TOKEN,
    link,
    headLayers: 'none',
    dtype: 'fp32',
    device: 'cpu',
    threads: 1,
    memoryBudgetBytes: 1 << 30,
    linkTimeoutMs: 30_000,
    ...extra,
  });
}

interface ServerSide {
  readonly endpoint: PeerEndpoint;
  close(code?: number, reason?: string): void;
}

export interface DirectPeerServer {
  readonly url: string; // ws://127.0.0.1:PORT/peer/ws
  /** Send an unprompted message to every connected head. */
  sendAll(message: ControlMessage): void;
  /** Close every connection from the peer's side (the peer vanished). */
  dropAll(reason: string): void;
  close(): Promise<void>;
}

/** A peer's direct listener: each socket gets a PeerEndpoint over `peer` (no join token). */
export async function startDirectPeerServer(peer: ShardPeer): Promise<DirectPeerServer> {
  const sides = new Map<object, ServerSide>();
  const app = new H3();
  app.get(
    '/peer/ws',
    defineWebSocketHandler({
      open(ws) {
        sides.set(ws, { endpoint: new PeerEndpoint(peer, { send: (d) => ws.send(d), close: (c, r) => ws.close(c, r) }), close: (c, r) => ws.close(c, r) });
      },
      async message(ws, message) {
        const raw = message.rawData as unknown;
        await sides.get(ws)?.endpoint.receive(typeof raw === 'string' ? raw : message.uint8Array());
      },
      close(ws) {
        sides.get(ws)?.endpoint.terminated();
        sides.delete(ws);
      },
    }),
  );
  const server = await startServer(app, { port: 0, host: '127.0.0.1' });
  return {
    url: `ws://127.0.0.1:${server.port}/peer/ws`,
    sendAll: (message) => sides.forEach((side) => side.endpoint.send(message)),
    dropAll: (reason) => sides.forEach((side) => side.close(1001, reason)),
    close: () => server.close(),
  };
}

/** A WebSocket that records what arrives, for sending hand-made bytes. */
export class RawSocket {
  private readonly inbox: (string | Uint8Array)[] = [];
  private waiter: (() => void) | undefined;
  closedReason: string | undefined;

  private constructor(private readonly dialed: DialedSocket) {
    dialed.attach({
      receive: (data) => {
        this.inbox.push(data);
        this.waiter?.();
      },
      terminated: (reason) => {
        this.closedReason = reason;
        this.waiter?.();
      },
    });
  }

  static async open(url: string): Promise<RawSocket> {
    return new RawSocket(await dialSocket(url));
  }

  /** A direct connection to a peer's listener, authenticated as the head does it (the challenge handshake). */
  static async openDirect(url: string, options: DirectDialOptions): Promise<RawSocket> {
    return new RawSocket(await dialDirectPeer(url, options));
  }

  send(data: string | Uint8Array): void {
    this.dialed.socket.send(data);
  }

  /** The next message (rejects if the socket closes first or nothing comes in `timeoutMs`). */
  async next(timeoutMs = 10_000): Promise<string | Uint8Array> {
    const deadline = Date.now() + timeoutMs;
    while (this.inbox.length === 0) {
      if (this.closedReason !== undefined) throw new Error(`socket closed with nothing to read: ${this.closedReason}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no message within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiter = () => (clearTimeout(timer), resolve());
      });
      this.waiter = undefined;
    }
    return this.inbox.shift()!;
  }

  /** The next message, which must be a control message (text). */
  async nextControl(timeoutMs?: number): Promise<ControlMessage> {
    const data = await this.next(timeoutMs);
    if (typeof data !== 'string') throw new Error(`expected a text message, got ${data.byteLength} binary bytes`);
    return JSON.parse(data) as ControlMessage;
  }

  /** Resolves with the close reason once the other side closed the socket. */
  async closedByPeer(timeoutMs = 10_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (this.closedReason === undefined) {
      if (Date.now() > deadline) throw new Error(`the socket is still open after ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return this.closedReason;
  }

  close(): void {
    this.dialed.socket.close(1000, 'test done');
  }
}
