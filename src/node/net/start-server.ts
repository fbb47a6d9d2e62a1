/**
 * Serving an h3 app (with crossws WebSockets) on a port: the one place that knows srvx and
 * crossws's Node server plugin. Port 0 picks a free port; `close` ends every connection,
 * WebSockets included.
 */
import { serve, type H3 } from 'h3';
import type { Duplex } from 'node:stream';
import { plugin as websocketPlugin } from 'crossws/server';

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
}

export async function startServer(app: H3, options: StartOptions): Promise<RunningServer> {
  // The plugin takes an object (crossws 0.4.17 crashes on `ws()`); hooks are resolved by
  // running the app, whose WebSocket routes return them.
  const plugin = websocketPlugin({
    resolve: async (request: Request) => ((await app.fetch(request)) as unknown as { crossws?: object }).crossws ?? {},
    serverOptions: { maxPayload: options.maxPayloadBytes ?? 256 * 1024 * 1024 },
  } as never);
  // gracefulShutdown off: srvx would add SIGINT/SIGTERM listeners per server (never removed,
  // and only outside CI) and close the server on its own; `meshnet serve` owns its shutdown.
  const server = serve(app, { port: options.port, hostname: options.host, plugins: [plugin], silent: true, gracefulShutdown: false } as never);
  await server.ready();
  // Why: upgraded (WebSocket) sockets leave the HTTP server's connection list, so
  // `close(true)` would wait for them forever — any client holding a socket open (even one
  // that never authenticated) would stall shutdown. Track them and end them on close.
  const upgraded = new Set<Duplex>();
  const node = (server as unknown as { node?: { server?: import('node:http').Server } }).node?.server;
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
