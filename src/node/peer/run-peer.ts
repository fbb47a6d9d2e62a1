/**
 * A Node shard peer process: dials the head's /peer/ws (its relay link), says hello, and
 * serves assigned layer ranges. With `listenPort` it also accepts direct links on its own
 * /peer/ws (the dialer must prove the join token in a challenge; no secret in the URL) and
 * announces that URL in its hello.
 */
import os from 'node:os';
import { H3, defineWebSocketHandler } from 'h3';
import { PeerEndpoint } from '../../core/peer/peer-endpoint.ts';
import { ShardPeer } from '../../core/peer/shard-peer.ts';
import type { ShardService } from '../../core/runtime/shard-service.ts';
import { DirectLinkGuard } from '../../core/peer/direct-auth.ts';
import type { ControlMessage } from '../../shared/control.ts';
import { isCompatibleVersion, PROTOCOL_VERSION, WIRE_WEIGHT_FORMATS } from '../../shared/protocol.ts';
import { startServer, type RunningServer } from '../net/start-server.ts';
import { dialSocket, httpOrigin, type DialedSocket } from '../net/ws-dial.ts';
import { backoffDelays } from '../../core/route/backoff.ts';
import { httpShardLoader } from './http-shard-loader.ts';
import { peerChains, type PeerChains } from '../../core/peer/peer-chains.ts';
import { batchedChainRuns, type BatchedChainRuns } from '../../core/mesh/batched-chain-runs.ts';
import { WorkerShardService } from './worker-shard.ts';
import { installHopTraceFromEnv } from '../hop-trace-file.ts';

export interface PeerProcessOptions {
  readonly headUrl: string; // ws://host:port/peer/ws
  readonly listenPort?: number;
  readonly listenHost?: string;
  /**
   * The address other machines dial for direct links (`--advertise`: behind a port forward, a
   * proxy or NAT), announced in the hello instead of the local listen address. Needs `listenPort`.
   */
  readonly advertiseUrl?: string;
  /** Delay every frame this peer sends another peer (bench: `--link-delay-ms`). */
  readonly linkDelayMs?: number;
  readonly device: string;
  readonly memoryBudgetBytes: number;
  /** Memory for prefix entries (finished sessions' KV kept for reuse), apart from the budget (`--prefix-cache`; default 0). */
  readonly prefixBudgetBytes?: number;
  readonly joinToken?: string;
  readonly peerId?: string;
  readonly threads?: number;
  readonly home?: string;
  /** Run the ShardPeer in a worker thread, so onnxruntime never blocks the sockets. */
  readonly worker?: boolean;
  readonly log?: (line: string) => void;
  /**
   * Stay joined (the `meshnet peer` command): when the head connection ends, dial again with
   * back-off and jitter, forever, until `close` or a refusal that cannot change. Absent: one
   * connection (`closed` resolves when it ends).
   */
  readonly reconnect?: ReconnectPolicy;
}

/** Back-off between reconnection attempts: from `baseMs`, doubling, at most `maxMs`; each shortened by up to half (jitter). */
export interface ReconnectPolicy {
  readonly baseMs: number;
  readonly maxMs: number;
}

/** `meshnet peer`'s: 250 ms doubling to 5 s. */
export const DEFAULT_RECONNECT: ReconnectPolicy = { baseMs: 250, maxMs: 5000 };

export interface RunningPeer {
  readonly peerId: string;
  readonly listenUrl?: string;
  readonly shard: ShardService;
  /** Its chained routes: what other peers sent it on peer-to-peer links, and how its chain frames ran (batched runs, singles, prefills). */
  readonly chains: { readonly received: PeerChains['received']; readonly runs: BatchedChainRuns['stats'] };
  /** Resolves with the reason when the head connection ends (with `reconnect`: when the peer gives up). */
  readonly closed: Promise<string>;
  /** Connections to the head made so far (1, then one more per rejoin). */
  readonly connections: number;
  close(): Promise<void>;
}

export function defaultPeerId(): string {
  return `node-${os.hostname()}-${process.pid}`.replace(/[^A-Za-z0-9._:-]/g, '-').slice(0, 128);
}

/**
 * The peer's direct listener: each connection is challenged (`DirectLinkGuard`) and served by
 * a PeerEndpoint only once the dialer proved it holds the join token this peer joined with.
 */
export function directListenerApp(shard: ShardService, peerId: string, joinToken: string | undefined, log: (line: string) => void = () => {}, chains?: PeerChains): H3 {
  const app = new H3();
  interface Side {
    readonly guard: DirectLinkGuard;
    endpoint?: PeerEndpoint;
    /** A peer dialled in (protocol 3.2): its chain frames. */
    hop?: (data: string | Uint8Array) => void;
  }
  const sides = new WeakMap<object, Side>();
  app.get(
    '/peer/ws',
    defineWebSocketHandler({
      open(peer) {
        const socket = { send: (d: string | Uint8Array) => peer.send(d), close: (c?: number, r?: string) => peer.close(c, r) };
        const side: Side = {
          guard: new DirectLinkGuard({
            peerId,
            joinToken,
            socket,
            acceptPeers: chains !== undefined,
            onAccepted: (from) => {
              if (from !== undefined && chains) side.hop = chains.hopSink(from);
              else side.endpoint = new PeerEndpoint(chains?.forwarder ?? shard, socket, undefined, chains?.endpoint);
            },
            onRefused: (reason) => log(`refused a direct connection: ${reason}`),
          }),
        };
        sides.set(peer, side);
        side.guard.open();
      },
      async message(peer, message) {
        const side = sides.get(peer);
        const raw = message.rawData as unknown;
        const data = typeof raw === 'string' ? raw : message.uint8Array();
        if (side?.hop) side.hop(data);
        else if (side?.endpoint) await side.endpoint.receive(data);
        else await side?.guard.receive(data);
      },
      close(peer) {
        const side = sides.get(peer);
        side?.guard.terminated();
        side?.endpoint?.terminated();
      },
    }),
  );
  return app;
}

export async function runPeer(options: PeerProcessOptions): Promise<RunningPeer> {
  installHopTraceFromEnv();
  const log = options.log ?? (() => {});
  const peerId = options.peerId ?? defaultPeerId();
  // An empty token is a mistake (an unset variable, a bad paste), never "no token": refuse
  // before starting anything, with the reason.
  if (options.joinToken === '') throw new Error('the join token is empty: pass the token the head printed (--join-token or MESHNET_JOIN_TOKEN), or leave it out');
  const loader = { origin: httpOrigin(options.headUrl), joinToken: options.joinToken, device: options.device, threads: options.threads, home: options.home };
  const shard: ShardService = options.worker
    ? new WorkerShardService({ loader: { kind: 'http', ...loader }, memoryBudgetBytes: options.memoryBudgetBytes, prefixBudgetBytes: options.prefixBudgetBytes }, log)
    : new ShardPeer({ loader: httpShardLoader({ ...loader, log }), memoryBudgetBytes: options.memoryBudgetBytes, prefixBudgetBytes: options.prefixBudgetBytes });
  // Chained routes (3.2): the head's links reach the shard through the forwarder.
  const runs = batchedChainRuns(shard);
  const chains = peerChains({ shard, peerId, joinToken: options.joinToken, dial: (url) => dialSocket(url), run: runs.run, linkDelayMs: options.linkDelayMs, log });
  let server: RunningServer | undefined;
  let current: HeadConnection | undefined;
  let stopped = false;
  // Every failure from here on releases what was started (the worker thread, the listener,
  // the socket), so a peer that cannot join exits instead of lingering.
  const close = async () => {
    stopped = true;
    current?.dialed.socket.close(1000, 'peer shutting down');
    chains.close();
    await server?.close();
    await shard.dispose();
  };
  try {
    let listenUrl: string | undefined;
    if (options.listenPort !== undefined) {
      const host = options.listenHost ?? '127.0.0.1';
      server = await startServer(directListenerApp(shard, peerId, options.joinToken, log, chains), { port: options.listenPort, host });
      listenUrl = options.advertiseUrl ?? `ws://${host}:${server.port}/peer/ws`;
    }
    let made = 0; // head connections made so far: the next hello's `rejoin.connections` (3.5)
    const join = async () => {
      // Joining again: what the last connection's head held here is nobody's now (after the back-off, so its steps are done).
      if (made > 0) await shard.forgetSessions?.();
      const connection = await joinHead(options, peerId, chains, listenUrl, made, log);
      made++;
      return connection;
    };
    // With `reconnect`, a head that is not up yet (restarting while this peer starts) is waited
    // for like a lost one: a peer spawned just before its head restarts must not exit.
    current = options.reconnect ? await retryJoin(options.reconnect, join, () => stopped, log, 'first join') : await join();
    log(`joined ${options.headUrl} as ${peerId}${listenUrl ? `, direct links on ${listenUrl}` : ''}`);
    const first = current;
    const closed = options.reconnect
      ? keepJoined(first, options.reconnect, join, () => stopped, (c) => (current = c), log)
      : first.closed;
    const chainStats = { get received() { return chains.received; }, get runs() { return runs.stats; } };
    return { peerId, listenUrl, shard, chains: chainStats, closed, close, get connections() { return connections(first); } };
  } catch (error) {
    await close();
    throw error;
  }
}

/** One connection to the head: its socket and when it ends. */
interface HeadConnection {
  readonly dialed: DialedSocket;
  readonly closed: Promise<string>;
}

/** A join the head refused for good (a wrong token, another protocol): retrying cannot change it. */
export class PermanentRefusalError extends Error {
  override readonly name = 'PermanentRefusalError';
}
const PERMANENT_CODES = new Set(['unauthorized', 'version_mismatch']);

/** The head answered the hello with a refusal that may change (a taken or reserved id): final on a first join, retried on a rejoin. */
class HeadRefusalError extends Error {
  override readonly name = 'HeadRefusalError';
}

const joins = new WeakMap<HeadConnection, { count: number }>();
const connections = (first: HeadConnection) => joins.get(first)?.count ?? 1;

/** Dial the head, say hello, wait for `welcome`. Rejects with PermanentRefusalError for a refusal that cannot change. */
async function joinHead(options: PeerProcessOptions, peerId: string, chains: PeerChains, listenUrl: string | undefined, madeBefore: number, log: (line: string) => void): Promise<HeadConnection> {
  const dialed = await dialSocket(options.headUrl);
  let welcomed!: (m: ControlMessage) => void;
  let refused!: (e: Error) => void;
  const welcome = new Promise<ControlMessage>((resolve, reject) => ((welcomed = resolve), (refused = reject)));
  welcome.catch(() => {});
  const endpoint = new PeerEndpoint(chains.forwarder, dialed.socket, (message) => {
    if (message.kind === 'welcome') welcomed(message);
    else if (message.kind === 'error') {
      const text = `the head refused this peer (${message.code}): ${message.message}`;
      refused(PERMANENT_CODES.has(message.code) ? new PermanentRefusalError(text) : new HeadRefusalError(text));
      log(`head error: ${message.message}`);
    }
  }, chains.endpoint);
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
  try {
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
      ...(madeBefore > 0 && { rejoin: { connections: madeBefore } }),
    });
    const answer = await welcome;
    if (answer.kind === 'welcome' && !isCompatibleVersion(answer.protocol)) {
      throw new PermanentRefusalError(`the head speaks protocol ${answer.protocol.major}.${answer.protocol.minor}, this peer ${PROTOCOL_VERSION.major}.${PROTOCOL_VERSION.minor}`);
    }
    return { dialed, closed };
  } catch (error) {
    dialed.socket.close(1000, 'join failed');
    throw error;
  }
}

/**
 * Stay joined: whenever the head connection ends, dial again after a capped, jittered
 * back-off, forever — until `stopped()` (SIGINT/SIGTERM closed the peer) or a refusal that
 * cannot change. The shard (its artifacts, its loaded ranges) is the same across connections,
 * so a head that comes back with the same model finds the ranges ready at its `assign`.
 * Resolves with the reason it gave up.
 */
async function keepJoined(
  first: HeadConnection,
  policy: ReconnectPolicy,
  join: () => Promise<HeadConnection>,
  stopped: () => boolean,
  set: (c: HeadConnection) => void,
  log: (line: string) => void,
): Promise<string> {
  const counter = { count: 1 };
  joins.set(first, counter);
  let connection = first;
  for (;;) {
    const reason = await connection.closed;
    if (stopped()) return reason;
    log(`the head connection ended (${reason}); reconnecting`);
    let next: HeadConnection;
    try {
      next = await retryJoin(policy, join, stopped, log, 'rejoin', true);
    } catch (error) {
      return stopped() ? reason : error instanceof Error ? error.message : String(error);
    }
    connection = next;
    set(connection);
    counter.count++;
  }
}

/**
 * Join until it works: `join()` now (unless `waitFirst`), then again after each capped,
 * jittered back-off. Rejects with a PermanentRefusalError, or when `stopped()`.
 */
async function retryJoin(policy: ReconnectPolicy, join: () => Promise<HeadConnection>, stopped: () => boolean, log: (line: string) => void, what: string, waitFirst = false): Promise<HeadConnection> {
  for (let attempt = 0; ; attempt++) {
    if (waitFirst || attempt > 0) {
      const delay = backoffDelays({ baseMs: policy.baseMs, maxMs: policy.maxMs, attempts: Math.min(attempt, 30) + 1, jitter: 0.5 }).at(-1)!;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
    if (stopped()) throw new Error('the peer was closed');
    try {
      const connection = await join();
      if (attempt > 0 || waitFirst) log(`${what === 'rejoin' ? 'rejoined' : 'joined'} the head after ${attempt + 1} attempt(s)`);
      return connection;
    } catch (error) {
      if (stopped() || error instanceof PermanentRefusalError) throw error;
      // A first join waits for a head that is not up, not for one that answered no (a duplicate or reserved id).
      if (what === 'first join' && error instanceof HeadRefusalError) throw error;
      if (attempt === 0) log(`${what}: ${error instanceof Error ? error.message : String(error)}; retrying`);
    }
  }
}
