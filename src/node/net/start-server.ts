/**
 * Serving an h3 app (with crossws WebSockets) on a port: the one place that knows srvx and
 * crossws's Node server plugin. Port 0 picks a free port; `close` ends every connection,
 * WebSockets included. With `requestTimeoutMs`, a client must send its request's headers
 * within that time (Node's `headersTimeout`, checked every quarter of it, at most every
 * second), and the whole request within that plus a grace (Node's `requestTimeout`: the
 * outer bound; the app's own body deadline answers first, see respond.ts). Malformed HTTP and
 * late headers are answered by `clientError` when given (the head answers in OpenAI's shape).
 * Every response passes `finishResponse` (reason phrase, gzip of JSON bodies when asked).
 */
import { serve, type H3 } from 'h3';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { plugin as websocketPlugin } from 'crossws/server';
import { finishResponse } from './finish-response.ts';

export interface RunningServer {
  readonly url: string; // http://host:port/
  readonly port: number;
  close(): Promise<void>;
}

export interface StartOptions {
  readonly port: number;
  readonly host: string;
  /** Largest WebSocket message accepted (activation frames of long prompts are large). */
  readonly maxPayloadBytes?: number;
  /** Headers within this many ms, the whole request within this plus REQUEST_GRACE_MS (default: Node's 60 s and 300 s). */
  readonly requestTimeoutMs?: number;
  /** The raw HTTP answer to a request Node refused before any handler ran (bad HTTP, late headers); default Node's bare status line. */
  readonly clientError?: (error: NodeJS.ErrnoException) => string | undefined;
}

/** How much longer than the body deadline Node's own whole-request bound is. */
export const REQUEST_GRACE_MS = 5000;

export async function startServer(app: H3, options: StartOptions): Promise<RunningServer> {
  // The plugin takes an object (crossws 0.4.17 crashes on `ws()`); hooks are resolved by
  // running the app, whose WebSocket routes return them.
  const plugin = websocketPlugin({
    resolve: async (request: Request) => ((await app.fetch(request)) as unknown as { crossws?: object }).crossws ?? {},
    serverOptions: { maxPayload: options.maxPayloadBytes ?? 256 * 1024 * 1024 },
  } as never);
  // gracefulShutdown off: srvx would add SIGINT/SIGTERM listeners per server (never removed,
  // and only outside CI) and close the server on its own; `meshnet serve` owns its shutdown.
  const timeoutMs = options.requestTimeoutMs;
  const timeouts =
    timeoutMs === undefined
      ? {}
      : { headersTimeout: timeoutMs, requestTimeout: timeoutMs + REQUEST_GRACE_MS, connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(timeoutMs / 4))) };
  // Every answer gets its reason phrase and, when asked, a gzipped JSON body (finish-response.ts).
  const fetch = async (request: Request) => finishResponse(request, await app.fetch(request));
  const server = serve(app, { port: options.port, hostname: options.host, plugins: [plugin], silent: true, gracefulShutdown: false, node: timeouts, fetch } as never);
  await server.ready();
  // Why: upgraded (WebSocket) sockets leave the HTTP server's connection list, so
  // `close(true)` would wait for them forever — any client holding a socket open (even one
  // that never authenticated) would stall shutdown. Track them and end them on close.
  const upgraded = new Set<Duplex>();
  const node = (server as unknown as { node?: { server?: import('node:http').Server } }).node?.server;
  if (options.clientError) {
    const answer = options.clientError;
    // Node's own handler, but with our body: write only while nothing of a response went out.
    node?.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
      const started = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent ?? false;
      const raw = socket.writable && !started && error.code !== 'ECONNRESET' ? answer(error) : undefined;
      if (raw === undefined) return socket.destroy();
      socket.end(raw);
    });
  }
  node?.on('upgrade', (_request: unknown, socket: Duplex) => {
    upgraded.add(socket);
    socket.once('close', () => upgraded.delete(socket));
  });
  const url = server.url!;
  const port = Number(new URL(url).port);
  return {
    url,
    port,
    close: async () => {
      const closing = server.close(true);
      for (const socket of upgraded) socket.destroy();
      await closing;
    },
  };
}
