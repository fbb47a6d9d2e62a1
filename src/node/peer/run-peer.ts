/**
 * A Node shard peer process: dials the head's /peer/ws (its relay link), says hello, and
 * serves assigned layer ranges. With `listenPort` it also accepts direct links on its own
 * /peer/ws (join token required in `?token=`) and announces that URL in its hello.
 */
import os from 'node:os';
import { H3, defineWebSocketHandler } from 'h3';
import { PeerEndpoint } from '../../core/peer/peer-endpoint.ts';
import { ShardPeer, type ShardService } from '../../core/peer/shard-peer.ts';
import { sameToken } from '../../core/route/peer-admission.ts';
import type { ControlMessage } from '../../shared/control.ts';
import { PROTOCOL_VERSION, WIRE_WEIGHT_FORMATS } from '../../shared/protocol.ts';
import { startServer, type RunningServer } from '../net/start-server.ts';
import { dialSocket, httpOrigin } from '../net/ws-dial.ts';
import { httpShardLoader } from './http-shard-loader.ts';
import { WorkerShardService } from './worker-shard.ts';

export interface PeerProcessOptions {
  readonly headUrl: string; // ws://host:port/peer/ws
  readonly listenPort?: number;
  readonly listenHost?: string;
  readonly device: string;
  readonly memoryBudgetBytes: number;
  readonly joinToken?: string;
  readonly peerId?: string;
  readonly threads?: number;
  readonly home?: string;
  /** Run the ShardPeer in a worker thread, so onnxruntime never blocks the sockets. */
  readonly worker?: boolean;
  readonly log?: (line: string) => void;
}

export interface RunningPeer {
  readonly peerId: string;
  readonly listenUrl?: string;
  readonly shard: ShardService;
  /** Resolves with the reason when the head connection ends. */
  readonly closed: Promise<string>;
  close(): Promise<void>;
}

export function defaultPeerId(): string {
  return `node-${os.hostname()}-${process.pid}`.replace(/[^A-Za-z0-9._:-]/g, '-').slice(0, 128);
}

function directServer(shard: ShardService, joinToken: string | undefined) {
  const app = new H3();
  const endpoints = new WeakMap<object, PeerEndpoint>();
  app.get(
    '/peer/ws',
    defineWebSocketHandler({
      upgrade(request) {
        const token = new URL(request.url).searchParams.get('token') ?? '';
        if (joinToken !== undefined && !sameToken(token, joinToken)) throw new Response('a valid join token is required', { status: 401 });
      },
      open(peer) {
        endpoints.set(peer, new PeerEndpoint(shard, { send: (d) => peer.send(d), close: (c, r) => peer.close(c, r) }));
      },
      async message(peer, message) {
        const raw = message.rawData as unknown;
        await endpoints.get(peer)?.receive(typeof raw === 'string' ? raw : message.uint8Array());
      },
      close(peer) {
        endpoints.get(peer)?.terminated();
      },
    }),
  );
  return app;
}

export async function runPeer(options: PeerProcessOptions): Promise<RunningPeer> {
  const log = options.log ?? (() => {});
  const peerId = options.peerId ?? defaultPeerId();
  const loader = { origin: httpOrigin(options.headUrl), joinToken: options.joinToken, device: options.device, threads: options.threads, home: options.home };
  const shard: ShardService = options.worker
    ? new WorkerShardService({ loader: { kind: 'http', ...loader }, memoryBudgetBytes: options.memoryBudgetBytes }, log)
    : new ShardPeer({ loader: httpShardLoader({ ...loader, log }), memoryBudgetBytes: options.memoryBudgetBytes });
  let server: RunningServer | undefined;
  let listenUrl: string | undefined;
  if (options.listenPort !== undefined) {
    const host = options.listenHost ?? '127.0.0.1';
    server = await startServer(directServer(shard, options.joinToken), { port: options.listenPort, host });
    listenUrl = `ws://${host}:${server.port}/peer/ws`;
  }

  const dialed = await dialSocket(options.headUrl);
  let welcomed!: (m: ControlMessage) => void;
  let refused!: (e: Error) => void;
  const welcome = new Promise<ControlMessage>((resolve, reject) => ((welcomed = resolve), (refused = reject)));
  const endpoint = new PeerEndpoint(shard, dialed.socket, (message) => {
    if (message.kind === 'welcome') welcomed(message);
    else if (message.kind === 'error') {
      refused(new Error(`the head refused this peer: ${message.message}`));
      log(`head error: ${message.message}`);
    }
  });
  let resolveClosed!: (reason: string) => void;
  const closed = new Promise<string>((resolve) => (resolveClosed = resolve));
  dialed.attach({
    receive: (data) => void endpoint.receive(data),
    terminated: (reason) => {
      endpoint.terminated();
      refused(new Error(`the head closed the connection: ${reason}`));
      resolveClosed(reason);
    },
  });
  endpoint.send({
    kind: 'hello',
    id: 'hello',
    protocol: PROTOCOL_VERSION,
    runtime: 'node',
    executionProvider: options.device,
    memoryBudgetBytes: options.memoryBudgetBytes,
    peerId,
    weightFormats: WIRE_WEIGHT_FORMATS, // onnxruntime-node runs every format on every provider
    ...(options.joinToken !== undefined && { joinToken: options.joinToken }),
    ...(listenUrl !== undefined && { listenUrl }),
  });
  const close = async () => {
    dialed.socket.close(1000, 'peer shutting down');
    await server?.close();
    await shard.dispose();
  };
  try {
    await welcome;
  } catch (error) {
    await close();
    throw error;
  }
  log(`joined ${options.headUrl} as ${peerId}${listenUrl ? `, direct links on ${listenUrl}` : ''}`);
  return { peerId, listenUrl, shard, closed, close };
}
