/** `meshnet peer`: run a Node shard peer that joins a head. */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { DEFAULT_RECONNECT, runPeer } from '../peer/run-peer.ts';
import { NODE_DEVICES } from '../ort-node-runtime.ts';
import { DEFAULT_BROWSE_MS } from '../discovery/lan-discovery.ts';
import { DEFAULT_PREFIX_CACHE_MB, parseChoice, parseInteger, parseNumber, UsageError } from './args.ts';
import { discoverHead } from './discover-head.ts';

export const PEER_USAGE = `meshnet peer [--head ws://HOST:PORT/peer/ws] [options]

  --head URL           the head's peer endpoint; without it, heads announced on the LAN
                       (mDNS) are listed: the only one is joined, a terminal is asked which
                       of several, and without a terminal the peer exits 2 with the list
  --discover-wait S    how long to listen for announcements (default 2)
  --listen PORT        also accept direct links on this port (0 = any free port)
  --listen-host HOST   address to listen on (default 127.0.0.1)
  --advertise URL      the ws:// or wss:// address other machines dial for direct links
                       (behind a port forward, a proxy or NAT), announced instead of the
                       local --listen address; the head and the previous hop of a chained
                       route dial it
  --device D           ${Object.keys(NODE_DEVICES).join('|')} (default auto)
  --memory-budget MB   memory for weights and KV (default: half of the free memory)
  --prefix-cache MB    memory for prefix entries: finished sessions' KV kept so a later
                       request with the same prompt prefix skips it (default 256; 0: off)
  --join-token T       the mesh's join token (or MESHNET_JOIN_TOKEN)
  --threads N          onnxruntime threads per shard
  --shard-thread T     main|worker (default main, or MESHNET_SHARD_THREAD): where the
                       shard runs. main: on the thread that holds the sockets, so a frame
                       reaches onnxruntime and its answer the socket with no thread
                       hand-off; control messages and signals wait for a run to end.
                       worker: in a worker thread, which keeps the sockets answering
                       during a run at the cost of two hand-offs per frame
  --peer-id ID         name shown on the head (default node-<host>-<pid>); 'head' is
                       reserved, and an id a connected peer holds is refused
  --once               exit when the head connection ends (the head's --local-peers do);
                       by default a lost connection is dialled again with back-off (250 ms
                       doubling to 5 s, jittered) forever, keeping the loaded layers

Exits 2 on a usage error (an empty join token included), 1 when the head refuses the
peer at its first join (the reason on stderr), when a refusal cannot change (a wrong join
token, another protocol) or, with --once, when the head connection ends; 0 on SIGINT/SIGTERM.

With MESHNET_MALLOC_ENV=1 on Linux with glibc, the peer runs under MALLOC_ARENA_MAX=1
MALLOC_MMAP_THRESHOLD_=65536, so memory onnxruntime frees goes back to the system: about
17% less resident growth for 19-24% more CPU a decode step (bin/meshnet.js starts it again
with them unless any is set already).`;

export async function peerCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      head: { type: 'string' },
      'discover-wait': { type: 'string' },
      listen: { type: 'string' },
      'listen-host': { type: 'string' },
      advertise: { type: 'string' },
      device: { type: 'string' },
      'memory-budget': { type: 'string' },
      'prefix-cache': { type: 'string' },
      'join-token': { type: 'string' },
      threads: { type: 'string' },
      'shard-thread': { type: 'string' },
      'peer-id': { type: 'string' },
      once: { type: 'boolean' },
    },
    strict: true,
  });
  if (values.head !== undefined && !/^wss?:\/\//.test(values.head)) throw new UsageError(`--head: '${values.head}' is not a ws:// or wss:// URL`);
  if (values.advertise !== undefined && !/^wss?:\/\/[^\s/?#]+[^\s]*$/.test(values.advertise)) throw new UsageError(`--advertise: '${values.advertise}' is not a ws:// or wss:// URL`);
  if (values.advertise !== undefined && values.listen === undefined) throw new UsageError('--advertise needs --listen: it is the address of the listener other machines dial');
  const log = (line: string) => process.stderr.write(`meshnet peer: ${line}\n`);
  const joinToken = values['join-token'] ?? process.env.MESHNET_JOIN_TOKEN;
  if (joinToken === '') {
    const where = values['join-token'] === '' ? '--join-token' : 'MESHNET_JOIN_TOKEN';
    throw new UsageError(`${where} is empty: pass the join token the head printed, or leave it out (a head on this machine that generated its token admits local peers without one)`);
  }
  const shardThread = parseChoice('shard-thread', values['shard-thread'] ?? (process.env.MESHNET_SHARD_THREAD || undefined), ['main', 'worker'], 'main');
  const waitMs = parseNumber('discover-wait', values['discover-wait'], DEFAULT_BROWSE_MS / 1000, (n) => n > 0 && n <= 60) * 1000;
  const headUrl = values.head ?? (await discoverHead({ waitMs, interactive: process.stdin.isTTY === true && process.stderr.isTTY === true, log }));
  const budgetMb = parseInteger('memory-budget', values['memory-budget'], Math.floor(os.freemem() / 2 / 2 ** 20), 1);
  const peer = await runPeer({
    headUrl,
    listenPort: values.listen === undefined ? undefined : parseInteger('listen', values.listen, 0),
    listenHost: values['listen-host'],
    advertiseUrl: values.advertise,
    device: parseChoice('device', values.device, Object.keys(NODE_DEVICES), 'auto'),
    memoryBudgetBytes: budgetMb * 2 ** 20,
    prefixBudgetBytes: parseInteger('prefix-cache', values['prefix-cache'], DEFAULT_PREFIX_CACHE_MB, 0) * 2 ** 20,
    joinToken,
    threads: values.threads === undefined ? undefined : parseInteger('threads', values.threads, 1, 1),
    peerId: values['peer-id'],
    worker: shardThread === 'worker',
    // A lost head connection is dialled again (back-off with jitter) until SIGINT/SIGTERM or a
    // refusal that cannot change; the loaded ranges and artifacts stay for the head's return.
    reconnect: values.once ? undefined : DEFAULT_RECONNECT,
    log,
  });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await peer.close();
    process.exit(0);
  };
  process.on('SIGTERM', stop); // `on`: a second signal (npm forwards Ctrl-C too) must not cut the close short
  process.on('SIGINT', stop);
  const reason = await peer.closed;
  await peer.close();
  // Non-zero: the peer did not choose to stop (--once, or a refusal that cannot change).
  throw new Error(`the head connection ended${values.once ? '' : ' and cannot be made again'} (${reason}); exiting`);
}
