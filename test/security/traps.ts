/**
 * Trap servers on loopback for the direct-dial tests: they record every request that
 * arrives (method, path and query, headers) and every WebSocket message, so a test can
 * assert that no secret ever reached them.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { H3, defineWebSocketHandler } from 'h3';
import { startServer } from '../../src/node/net/start-server.ts';

export interface RecordedRequest {
  readonly method: string;
  readonly url: string; // path and query as sent
  readonly headers: http.IncomingHttpHeaders;
  readonly upgrade: boolean;
}

export interface Trap {
  readonly host: string;
  readonly port: number;
  readonly requests: RecordedRequest[];
  /** Text messages received on accepted WebSockets (WebSocket traps only). */
  readonly messages: string[];
  close(): Promise<void>;
}

/**
 * An HTTP server that records each request and upgrade and answers 404 (an upgrade gets a
 * 404 status line, so a WebSocket dial fails at once). `port` 0 picks one; a taken port rejects.
 */
export function startHttpTrap(host: string, port = 0): Promise<Trap> {
  const requests: RecordedRequest[] = [];
  const server = http.createServer((request, response) => {
    requests.push({ method: request.method!, url: request.url!, headers: request.headers, upgrade: false });
    response.writeHead(404).end('trap');
  });
  server.on('upgrade', (request, socket) => {
    requests.push({ method: request.method!, url: request.url!, headers: request.headers, upgrade: true });
    socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      resolve({
        host,
        port: (server.address() as AddressInfo).port,
        requests,
        messages: [],
        close: () => new Promise<void>((done) => (server.closeAllConnections(), server.close(() => done()))),
      });
    });
  });
}

/** Two HTTP traps on the same port, one per host (retries while the port is taken on `second`). */
export async function startTrapPair(first: string, second: string): Promise<[Trap, Trap]> {
  for (let attempt = 0; ; attempt++) {
    const a = await startHttpTrap(first);
    try {
      return [a, await startHttpTrap(second, a.port)];
    } catch (error) {
      await a.close();
      if (attempt >= 20) throw error;
    }
  }
}

/**
 * A WebSocket server on every path that plays a peer's listener without knowing the token:
 * it records the upgrade request and every message, sends `challenge` (a fixed, valid-looking
 * nonce) on open unless told not to, and answers each message with `answer` (e.g. a forged
 * `authenticated`).
 */
export async function startWebSocketTrap(answer: (message: string) => string | undefined, options: { challenge?: boolean } = {}): Promise<Trap> {
  const requests: RecordedRequest[] = [];
  const messages: string[] = [];
  const app = new H3();
  app.use((event, next) => {
    const url = new URL(event.req.url);
    requests.push({ method: event.req.method, url: url.pathname + url.search, headers: Object.fromEntries(event.req.headers), upgrade: event.req.headers.get('upgrade') !== null });
    return next();
  });
  app.get(
    '/**',
    defineWebSocketHandler({
      open(peer) {
        if (options.challenge !== false) peer.send(JSON.stringify({ kind: 'challenge', nonce: '5a'.repeat(32) }));
      },
      message(peer, message) {
        const text = message.text();
        messages.push(text);
        const reply = answer(text);
        if (reply !== undefined) peer.send(reply);
      },
    }),
  );
  const server = await startServer(app, { port: 0, host: '127.0.0.1' });
  return { host: '127.0.0.1', port: server.port, requests, messages, close: () => server.close() };
}
