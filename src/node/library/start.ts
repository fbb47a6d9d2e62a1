/**
 * meshnet as a library: `startHead` is `meshnet serve` and `startPeer` is `meshnet peer`, as
 * functions for programs that embed a mesh. Options are the commands' flags in camelCase and
 * default as the flags do, except `port` (0: any free port; `url` says which) and `log`
 * (silent unless given). Both return handles whose `close()` frees every socket, worker and
 * child process they started.
 */
import os from 'node:os';
import { DEFAULT_PREFIX_CACHE_MB } from '../defaults.ts';
import { runPeer } from '../peer/run-peer.ts';
import { serveHead, type ServeOptions } from '../serve/serve-head.ts';

/** The options of `meshnet serve`, each optional (see ServeOptions for every field). */
export type StartHeadOptions = Partial<Omit<ServeOptions, 'mount'>>;

/** A running head: the OpenAI API at `apiUrl`, the dashboard at `url` + `dashboard`. */
export interface MeshnetHead {
  /** `http://host:port/` */
  readonly url: string;
  /** `http://host:port/v1`: the base URL for OpenAI clients. */
  readonly apiUrl: string;
  /** `ws://host:port/peer/ws`: what a peer's `head` names. */
  readonly peerUrl: string;
  /** The token peers present (generated unless `joinToken` was given; undefined when `joinToken: null`). */
  readonly joinToken: string | undefined;
  /** The served model's name, as requests give it (`demo`, a folder's name, a Hub id). */
  readonly modelId: string;
  /** Resolves once `count` peers (other than the head) have joined; rejects after `timeoutMs`. */
  waitForPeers(count: number, timeoutMs?: number): Promise<void>;
  /** Ends live sessions, closes the server and stops local peers. */
  close(): Promise<void>;
}

/** Start a head, as `meshnet serve` does. */
export async function startHead(options: StartHeadOptions = {}): Promise<MeshnetHead> {
  const serving = await serveHead({
    model: 'demo',
    port: 0,
    host: '127.0.0.1',
    localPeers: 0,
    link: 'relay',
    headLayers: 'auto',
    maxSessions: 8,
    prefixCacheMb: DEFAULT_PREFIX_CACHE_MB,
    peerPingTimeoutMs: 3000,
    device: 'auto',
    dtype: 'fp32',
    ...withoutUndefined(options),
  });
  const url = serving.head.url;
  return {
    url,
    apiUrl: `${url.replace(/\/$/, '')}/v1`,
    peerUrl: serving.head.peerUrl,
    joinToken: serving.head.joinToken,
    modelId: serving.modelId,
    waitForPeers: (count, timeoutMs = 60_000) => serving.head.waitForPeers(count, timeoutMs),
    close: () => serving.close(),
  };
}

/** `{ port: undefined }` keeps the default, as leaving `port` out does. */
function withoutUndefined<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}

export interface StartPeerOptions {
  /** The head's peer endpoint, `ws://host:port/peer/ws` (a head's `peerUrl`). */
  readonly head: string;
  /** The mesh's join token (a head's `joinToken`). */
  readonly joinToken?: string;
  /** `auto` (default), `cpu`, `webgpu`, `cuda` or `wasm`. */
  readonly device?: string;
  /** Memory for weights and KV (default: half of the free memory). */
  readonly memoryBudgetMb?: number;
  /** Memory for prefix entries, apart from the budget (default 256; 0: off). */
  readonly prefixCacheMb?: number;
  /** Also accept direct links on this port (0: any free port). */
  readonly listen?: number;
  readonly listenHost?: string;
  /** onnxruntime threads per shard. */
  readonly threads?: number;
  /** The name the head shows (default `node-<host>-<pid>`). */
  readonly peerId?: string;
  readonly log?: (line: string) => void;
}

/** A Node shard peer that joined a head. */
export interface MeshnetPeer {
  readonly peerId: string;
  /** Where it accepts direct links, with `listen`. */
  readonly listenUrl: string | undefined;
  /** Resolves with the reason when the head connection ends. */
  readonly closed: Promise<string>;
  close(): Promise<void>;
}

/**
 * Join a head as a Node shard peer, as `meshnet peer` does: its layers run in a worker thread,
 * so onnxruntime never blocks the caller's event loop. Rejects when the head refuses it.
 */
export async function startPeer(options: StartPeerOptions): Promise<MeshnetPeer> {
  const peer = await runPeer({
    headUrl: options.head,
    joinToken: options.joinToken,
    device: options.device ?? 'auto',
    memoryBudgetBytes: (options.memoryBudgetMb ?? Math.floor(os.freemem() / 2 / 2 ** 20)) * 2 ** 20,
    prefixBudgetBytes: (options.prefixCacheMb ?? DEFAULT_PREFIX_CACHE_MB) * 2 ** 20,
    listenPort: options.listen,
    listenHost: options.listenHost,
    threads: options.threads,
    peerId: options.peerId,
    worker: true,
    log: options.log,
  });
  return { peerId: peer.peerId, listenUrl: peer.listenUrl, closed: peer.closed, close: () => peer.close() };
}
