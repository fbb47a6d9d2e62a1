/**
 * CPU time a hop adds per decode token (issue #24: "the hop"), read from each process's own
 * CPU clock rather than wall time, which other load on a shared machine inflates: a head with
 * no layers and N local peer processes over relay (or direct) links, one onnxruntime thread
 * each, decode steps of one session; per decode frame, each peer's CPU time (every thread,
 * /proc/<pid>/stat) and its shard run's own time (its `stats`), and the head's CPU time per
 * token. On stories260k the layers cost almost nothing, so a peer's CPU per frame is the
 * hop's own cost: sockets, event loops, the worker hand-off (MESHNET_SHARD_THREAD=worker), frame codecs and checks.
 *
 *   node --import tsx bench/hop-cpu.ts [--model DIR] [--peers 2] [--tokens 400] [--link relay] [--rounds 3] [--cpu-prof DIR]
 *
 * `--cpu-prof DIR` starts the peers with Node's `--cpu-prof` (a .cpuprofile per thread, main
 * and worker, written at exit into DIR). Set MESHNET_HOME.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { RouteSession } from '../src/core/route/route-session.ts';
import { validateSamplingParams } from '../src/core/sampling/index.ts';
import { DEFAULT_HOP_TIMEOUT_MS, startHead } from '../src/node/head/head-node.ts';
import { openLocalModel, openLocalTokenizer } from '../src/node/local-model.ts';
import { spawnLocalPeers } from '../src/node/peer/local-peers.ts';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: path.resolve(import.meta.dirname, '../test/fixtures/models/stories260k') },
    peers: { type: 'string', default: '2' },
    tokens: { type: 'string', default: '400' },
    link: { type: 'string', default: 'relay' },
    rounds: { type: 'string', default: '3' },
    'cpu-prof': { type: 'string' },
  },
});
const peerCount = Number(values.peers);
const tokens = Number(values.tokens);
const link = values.link === 'direct' ? 'direct' : 'relay';
const TICK_MS = 1000 / 100; // USER_HZ: /proc/<pid>/stat counts CPU time in ticks of 10 ms

/** utime and stime of a process, every thread, in ms. */
async function processCpuMs(pid: number): Promise<{ user: number; system: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(fields[11]) * TICK_MS, system: Number(fields[12]) * TICK_MS }; // fields 14 and 15 of stat(5)
}
const ownCpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

const model = await openLocalModel(values.model);
const { vocabSize } = model.checkpoint.config;
const head = await startHead({ model, tokenizer: await openLocalTokenizer(model), name: 'hop-cpu', port: 0, host: '127.0.0.1', link, headLayers: 'none', dtype: 'fp32', device: 'cpu', threads: 1, log: () => {} });
// `--cpu-prof` is refused in NODE_OPTIONS: the peers' node gets it as an exec argument.
const execArgv = values['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(values['cpu-prof'])] : [];
const peers = spawnLocalPeers({ count: peerCount, headUrl: head.peerUrl, joinToken: head.joinToken, link, device: 'cpu', threads: 1, execArgv, log: () => {} });

async function generate(count: number): Promise<{ tokens: number; hops: { peerId: string; frames: number }[] }> {
  // Straight on the mesh (not the session table): no stop tokens, every token is decoded.
  const params = validateSamplingParams({ temperature: 0, maxTokens: count });
  const promptIds = Array.from({ length: 8 }, (_, i) => 1 + ((i * 37) % (vocabSize - 1)));
  const session = new RouteSession({ head: head.headRunner, route: head.mesh, vocabSize, policy: { hopTimeoutMs: DEFAULT_HOP_TIMEOUT_MS, prefillChunk: 0 } }, { sessionId: randomUUID(), promptIds, params, speculate: 'off' });
  let n = 0;
  for await (const event of session) if (event.type === 'token') n++;
  return { tokens: n, hops: session.telemetry.hops.map((h) => ({ peerId: h.peerId, frames: h.frames })) };
}

try {
  await head.waitForPeers(peerCount, 120_000);
  await generate(4); // the peers load their layers
  const rows: { round: number; fromUs: number; toUs: number; headCpuPerToken: number; peerCpuPerFrame: number[]; peerSystemPerFrame: number[]; wallPerToken: number; load: number }[] = [];
  for (let round = 0; round < Number(values.rounds); round++) {
    const pids = peers.processes.map((p) => p.pid!);
    const before = await Promise.all(pids.map(processCpuMs));
    const headBefore = ownCpuMs();
    const started = performance.now();
    const fromUs = Number(process.hrtime.bigint() / 1000n);
    const result = await generate(tokens);
    const toUs = Number(process.hrtime.bigint() / 1000n);
    const wall = performance.now() - started;
    const headCpu = ownCpuMs() - headBefore;
    const after = await Promise.all(pids.map(processCpuMs));
    const frames = result.hops.map((h) => h.frames);
    rows.push({
      round: round + 1,
      fromUs, // the monotonic clock (as .cpuprofile timestamps), for picking the decode's samples
      toUs,
      headCpuPerToken: headCpu / result.tokens,
      peerCpuPerFrame: after.map((a, i) => (a.user + a.system - before[i]!.user - before[i]!.system) / (frames[i] ?? result.tokens)),
      peerSystemPerFrame: after.map((a, i) => (a.system - before[i]!.system) / (frames[i] ?? result.tokens)),
      wallPerToken: wall / result.tokens,
      load: os.loadavg()[0],
    });
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(
    JSON.stringify({
      model: path.basename(values.model),
      peers: peerCount,
      link,
      tokens,
      rounds: rows,
      medianHeadCpuMsPerToken: median(rows.map((r) => r.headCpuPerToken)),
      medianPeerCpuMsPerFrame: rows[0]!.peerCpuPerFrame.map((_, i) => median(rows.map((r) => r.peerCpuPerFrame[i]!))),
      medianPeerSystemMsPerFrame: rows[0]!.peerSystemPerFrame.map((_, i) => median(rows.map((r) => r.peerSystemPerFrame[i]!))),
      medianWallMsPerToken: median(rows.map((r) => r.wallPerToken)),
    }),
  );
} finally {
  await head.close();
  await peers.close();
}
