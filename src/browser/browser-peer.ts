/**
 * A browser tab as a shard peer: dials the head's /peer/ws (a relay link — tabs cannot
 * accept connections), says hello with its runtime, execution provider, WebGPU adapter facts
 * and memory budget, then serves the layer ranges it is assigned with the same ShardPeer the
 * Node peer runs. When the head connection is lost (the head restarts, the socket drops) the
 * tab rejoins under the same id with back-off and jitter, forever, keeping its shard and
 * loaded ranges, until it is closed or refused for good. In a chained route (3.2) it forwards
 * its output straight to a next hop that listens, dialling out to it (browser-chains.ts); the
 * link into it goes through the head. A lost GPU device closes the link for good: the head
 * treats it as a peer loss.
 */
import * as ort from 'onnxruntime-web/webgpu';
import { PeerEndpoint } from '../core/peer/peer-endpoint.ts';
import { ShardPeer } from '../core/peer/shard-peer.ts';
import type { AdapterInfo, ControlMessage } from '../shared/control.ts';
import { PROTOCOL_VERSION, WIRE_WEIGHT_FORMATS } from '../shared/protocol.ts';
import { backoffDelays } from '../core/route/backoff.ts';
import { tabChains } from './browser-chains.ts';
import { openBrowserSocket, type BrowserSocket } from './browser-socket.ts';
import { fetchShardLoader } from './fetch-loader.ts';

/** The shard's way onto this tab: its files' bytes as they arrive, then onnxruntime loading it. */
export interface ShardDownload {
  phase: 'downloading' | 'loading' | 'done';
  /** Bytes received over every file so far. */
  received: number;
  /** The weights' size (from the manifest) plus the graph's (once its download starts). */
  total: number;
  /** `performance.now()` at the first byte asked for, and when the shard was ready. */
  startedAt: number;
  finishedAt?: number;
}

export interface BrowserPeerStatus {
  /** 'reconnecting': the head connection was lost; the tab dials again with back-off (its layers kept). */
  state: 'connecting' | 'connected' | 'reconnecting' | 'refused' | 'disconnected';
  /** Welcomes so far: 1 after the first join, one more per rejoin. */
  connections?: number;
  executionProvider?: string;
  layers: string[];
  tokensServed: number;
  /** The current (or last) shard's download and load. */
  download?: ShardDownload;
  progress?: string;
  lastError?: string;
  adapter?: AdapterInfo;
}

export interface BrowserPeerOptions {
  readonly headUrl: string; // ws(s)://host/peer/ws
  readonly joinToken?: string;
  readonly device: 'auto' | 'webgpu' | 'wasm';
  readonly peerId?: string;
  readonly memoryBudgetBytes?: number;
  readonly onStatus: (status: BrowserPeerStatus) => void;
  /** Back-off between rejoin attempts (default 250 ms doubling to 5 s, jittered); false: one connection. */
  readonly reconnect?: { readonly baseMs: number; readonly maxMs: number } | false;
}

/** As `meshnet peer`: 250 ms doubling to 5 s, each delay shortened by up to half. */
export const DEFAULT_TAB_RECONNECT = { baseMs: 250, maxMs: 5000 } as const;
/** Refusals a retry cannot change. */
const PERMANENT_CODES = new Set(['unauthorized', 'version_mismatch']);

async function adapterInfo(): Promise<AdapterInfo | undefined> {
  const gpu = (navigator as Navigator & { gpu?: { requestAdapter(): Promise<{ info?: Record<string, unknown> } | null> } }).gpu;
  const adapter = await gpu?.requestAdapter().catch(() => null);
  if (!adapter) return undefined;
  const info = adapter.info ?? {};
  return { vendor: String(info.vendor ?? ''), architecture: String(info.architecture ?? ''), isFallbackAdapter: Boolean(info.isFallbackAdapter) };
}

export interface RunningBrowserPeer {
  /** The id it joins under, the same on every rejoin. */
  readonly peerId: string;
  /** Resolves when the tab gives up: `close()`, a refusal that cannot change, a lost GPU device. */
  readonly closed: Promise<string>;
  close(): void;
}

export async function runBrowserPeer(options: BrowserPeerOptions): Promise<RunningBrowserPeer> {
  const status: BrowserPeerStatus = { state: 'connecting', layers: [], tokensServed: 0 };
  const report = () => options.onStatus({ ...status, layers: [...status.layers] });
  report();
  const adapter = options.device === 'wasm' ? undefined : await adapterInfo();
  status.adapter = adapter;
  const device = options.device === 'auto' ? (adapter ? 'auto' : 'wasm') : options.device;
  const origin = new URL(options.headUrl.replace(/^ws/, 'http')).origin;
  // Per file of the current shard: bytes received and the size announced.
  let files = new Map<string, { received: number; total: number }>();
  let weightsBytes = 0;
  const shard = new ShardPeer({
    loader: fetchShardLoader({
      origin,
      joinToken: options.joinToken,
      device,
      onStart: (weights) => {
        files = new Map();
        weightsBytes = weights;
        status.download = { phase: 'downloading', received: 0, total: weights, startedAt: performance.now() };
        report();
      },
      onProgress: (file, received, total) => {
        files.set(file, { received, total: total ?? received });
        const graph = files.get('graph.onnx');
        const all = [...files.values()].reduce((sum, f) => sum + f.received, 0);
        status.download = { ...status.download!, received: all, total: Math.max(all, weightsBytes + (graph?.total ?? 0)) };
        status.progress = `${file} ${(received / 2 ** 20).toFixed(1)}${total ? `/${(total / 2 ** 20).toFixed(1)}` : ''} MB`;
        report();
      },
      onLoading: () => {
        if (status.download) status.download = { ...status.download, phase: 'loading' };
        report();
      },
    }),
    memoryBudgetBytes: options.memoryBudgetBytes ?? 512 * 2 ** 20,
    onServed: (frame) => {
      status.tokensServed += frame.activations.tokens;
      report();
    },
  });
  const peerId = options.peerId ?? `browser-${crypto.randomUUID().slice(0, 8)}`;
  const chains = tabChains(shard, peerId, options.joinToken);
  const policy = options.reconnect === undefined ? DEFAULT_TAB_RECONNECT : options.reconnect;
  let resolveClosed!: (reason: string) => void;
  const closed = new Promise<string>((resolve) => (resolveClosed = resolve));
  let current: BrowserSocket | undefined;
  let stopped = false;
  let gpuLost = false;
  let ended = false;
  const end = (reason: string) => {
    if (ended) return;
    ended = true;
    if (status.state !== 'refused') status.state = 'disconnected';
    status.lastError ??= reason;
    report();
    chains.close();
    void shard.dispose();
    resolveClosed(reason);
  };
  const watchDevice = () => {
    // After a WebGPU session exists, a lost device ends this peer (no rejoin: its executors are gone): the head replaces it.
    const gpuDevice = (ort.env as { webgpu?: { device?: Promise<{ lost: Promise<{ message: string }> }> } }).webgpu?.device;
    void Promise.resolve(gpuDevice)
      .then((d) => d?.lost)
      .then((info) => {
        if (!info) return;
        status.lastError = `GPU device lost: ${info.message}`;
        gpuLost = true;
        current?.socket.close(4003, 'gpu device lost');
      })
      .catch(() => undefined);
  };
  /** Serve the head over `socket`: hello, then frames; `lost` runs when the socket ends. */
  const serve = (socket: BrowserSocket, lost: (reason: string) => void) => {
    current = socket;
    const endpoint = new PeerEndpoint(chains.forwarder, socket.socket, (message: ControlMessage) => {
      if (message.kind === 'welcome') {
        status.state = 'connected';
        status.connections = (status.connections ?? 0) + 1;
        status.lastError = undefined;
      }
      if (message.kind === 'error') {
        status.lastError = message.message;
        if (PERMANENT_CODES.has(message.code)) status.state = 'refused';
      }
      report();
    }, chains.endpoint);
    socket.attach({
      receive: (data) => {
        void endpoint.receive(data).then(() => {
          const layers = shard.ranges.map((r) => `[${r.start}, ${r.end})`);
          if (layers.join() !== status.layers.join()) {
            status.layers = layers;
            status.executionProvider = shard.devices[0];
            status.progress = undefined;
            if (status.download) status.download = { ...status.download, phase: 'done', finishedAt: performance.now() };
            if (status.executionProvider === 'webgpu') watchDevice();
            report();
          }
        });
      },
      terminated: (reason) => {
        endpoint.terminated();
        lost(reason);
      },
    });
    endpoint.send({
      kind: 'hello',
      id: 'hello',
      protocol: PROTOCOL_VERSION,
      runtime: 'browser',
      executionProvider: device === 'wasm' ? 'wasm' : 'webgpu',
      memoryBudgetBytes: options.memoryBudgetBytes ?? 512 * 2 ** 20,
      peerId,
      // onnxruntime-web 1.30 runs MatMulNBits (4 and 8 bits, with or without zero points) on wasm and WebGPU.
      weightFormats: WIRE_WEIGHT_FORMATS,
      ...(options.joinToken ? { joinToken: options.joinToken } : {}),
      ...(adapter ? { adapter } : {}),
      ...(status.connections ? { rejoin: { connections: status.connections } } : {}),
    });
  };
  /**
   * The head connection ended: give up when the tab closed it, the head refused for good or the
   * GPU is lost; else dial again after a capped, jittered back-off, forever, keeping the shard
   * (its artifacts and loaded ranges: a head that comes back with the same model finds them).
   */
  /** Ends the back-off sleep at once (close() while reconnecting). */
  let wake: (() => void) | undefined;
  const lost = (reason: string) => {
    current = undefined;
    if (stopped || gpuLost || status.state === 'refused' || policy === false) return end(reason);
    status.state = 'reconnecting';
    status.lastError = reason;
    report();
    void (async () => {
      for (let attempt = 0; ; attempt++) {
        const delay = backoffDelays({ baseMs: policy.baseMs, maxMs: policy.maxMs, attempts: Math.min(attempt, 30) + 1, jitter: 0.5 }).at(-1)!;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delay);
          wake = () => (clearTimeout(timer), resolve());
        });
        wake = undefined;
        if (stopped) return end(reason);
        try {
          const socket = await openBrowserSocket(options.headUrl);
          if (stopped) return (socket.socket.close(1000, 'tab left the mesh'), end(reason));
          // What the last connection's head held here is nobody's now (a restarted head never releases it).
          await shard.forgetSessions();
          return serve(socket, lost);
        } catch (error) {
          status.lastError = error instanceof Error ? error.message : String(error);
          report();
        }
      }
    })();
  };
  // The first join fails fast (the page shows why); later losses are retried.
  serve(await openBrowserSocket(options.headUrl), lost);
  return {
    peerId,
    closed,
    close: () => {
      stopped = true;
      if (current) current.socket.close(1000, 'tab left the mesh');
      else if (status.state !== 'reconnecting') end('tab left the mesh');
      else wake?.(); // a dial in flight ends when it settles
    },
  };
}
