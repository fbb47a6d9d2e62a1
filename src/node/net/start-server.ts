/**
 * Serving an h3 app (with crossws WebSockets) on a port: the one place that knows srvx and
 * crossws's Node server plugin. Port 0 picks a free port; `close` ends every connection.
 */
import { serve, type H3 } from 'h3';
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
  const url = server.url!;
  const port = Number(new URL(url).port);
  return {
    url,
    port,
    close: async () => {
      await server.close(true);
    },
  };
}
