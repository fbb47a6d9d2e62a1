/**
 * Issue 17's targets on the SmolLM2-shaped model (8,192-position context), as ratios measured
 * in one run, medians of interleaved rounds (the machine is shared: each round records the
 * load average):
 *
 * 1. decode tokens/s at 2,048 positions of context ≥ 75% of that at 32 — one process, and a
 *    head with two peer processes;
 * 2. aggregate decode tokens/s of 8 concurrent streams over the 2-peer pipeline ≥ 4× one
 *    stream's; one stream alone with batching on within 5% of batching off (the two
 *    setups alternate which runs first and serve the same streams). Beside the wall-clock
 *    ratio, decode tokens per CPU second of head + peers while every stream decodes (Linux
 *    /proc), which a loaded machine does not move: on a shared 2-core box the wall clock
 *    measures the CPU share we got;
 * 3. time to first token of the second turn of a 1,500-token conversation ≤ 25% of a cold
 *    start (prefix reuse).
 *
 *   npm run bench:kv [-- --rounds N --threads N --decode-tokens N --quick]
 *
 * Writes bench/results/kv-<timestamp>.json and .md (also results/kv-latest.md).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PrefixRegistry } from '../src/core/route/prefix-registry.ts';
import { RouteSession } from '../src/core/route/route-session.ts';
import type { RouteProvider } from '../src/core/mesh/route-provider.ts';
import type { HeadRunner } from '../src/core/runtime/ort-head-runner.ts';
import { validateSamplingParams } from '../src/core/sampling/index.ts';
import { startHead, type RunningHead } from '../src/node/head/head-node.ts';
import { loadLocalPipeline, openLocalModel, openLocalTokenizer, type LocalModel } from '../src/node/local-model.ts';
import { spawnLocalPeers, type LocalPeers } from '../src/node/peer/local-peers.ts';
import { generateCheckpoint } from './generate-checkpoint.ts';
import { median, promptOf } from './requests.ts';

const BENCH = import.meta.dirname;
const { values } = parseArgs({
  options: { rounds: { type: 'string' }, threads: { type: 'string' }, 'decode-tokens': { type: 'string' }, quick: { type: 'boolean' }, only: { type: 'string' } },
});
const quick = values.quick ?? false;
const ROUNDS = Number(values.rounds ?? (quick ? 2 : 3));
const THREADS = Number(values.threads ?? 1);
const DECODE = Number(values['decode-tokens'] ?? (quick ? 16 : 32));
const ONLY = new Set((values.only ?? 'context,batch,prefix').split(','));
const LONG_CONTEXT = 2048;
const SHORT_CONTEXT = 32;
const CONVERSATION = 1500;
const STREAMS = 8;

interface Target {
  readonly vehicle: { head: HeadRunner; route: RouteProvider; vocab: number };
  readonly prefixes?: PrefixRegistry;
}

interface Timed {
  readonly ttftMs: number;
  /** Token arrival times (ms, performance.now()). */
  readonly times: number[];
  readonly ids: number[];
  readonly cachedTokens: number;
}

async function generate(t: Target, promptIds: number[], tokens: number, window?: CpuWindow): Promise<Timed> {
  const session = new RouteSession(
    { head: t.vehicle.head, route: t.vehicle.route, vocabSize: t.vehicle.vocab, prefixes: t.prefixes },
    { sessionId: randomUUID(), promptIds, params: validateSamplingParams({ temperature: 0, maxTokens: tokens }) },
  );
  const started = performance.now();
  const times: number[] = [];
  const ids: number[] = [];
  for await (const event of session) {
    if (event.type === 'token') {
      times.push(performance.now());
      ids.push(event.tokenId);
      window?.token(session);
    }
  }
  window?.end();
  await session.closed; // the releases (and a kept prefix entry) are done before the next request
  return { ttftMs: times[0] - started, times, ids, cachedTokens: session.telemetry.cachedTokens ?? 0 };
}

/** Decode tokens/s of one stream: 1000 ÷ the median interval between tokens. */
function decodeRate(t: Timed): number {
  const gaps = t.times.slice(1).map((x, i) => x - t.times[i]);
  return 1000 / median(gaps);
}

/** Tokens/s of concurrent streams while all of them run: tokens that arrive between the last first token and the first last token. */
function aggregateRate(runs: Timed[]): number {
  const from = Math.max(...runs.map((r) => r.times[0]));
  const to = Math.min(...runs.map((r) => r.times.at(-1)!));
  const tokens = runs.reduce((n, r) => n + r.times.filter((x) => x > from && x <= to).length, 0);
  return (tokens / (to - from)) * 1000;
}

const load = () => os.loadavg()[0];

/** CPU ms the bench process (the heads) and the given peer processes have used so far (Linux /proc; 100 ticks/s). */
function cpuMs(peers: LocalPeers): { head: number; peers: number } {
  const own = process.cpuUsage();
  let ms = 0;
  for (const child of peers.processes) {
    const fields = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
    ms += (Number(fields[11]) + Number(fields[12])) * 10; // utime, stime (fields 14 and 15)
  }
  return { head: (own.user + own.system) / 1000, peers: ms };
}

/** Share of the CPU that the head (this process) used, per setup and stream count. */
const headShares: Record<string, number[]> = {};

/**
 * Decode tokens per CPU second of head and peers while every stream is decoding: the window
 * opens when the last stream got its first token (every prefill done) and closes when the
 * first stream ends. A loaded machine moves the wall clock, not this.
 */
class CpuWindow {
  private readonly started = new Set<object>();
  private open?: { head: number; peers: number };
  private tokens = 0;
  tokensPerCpuS = NaN;
  headShare = NaN;

  constructor(
    private readonly peers: LocalPeers,
    private readonly streams: number,
  ) {}

  token(stream: object): void {
    if (this.open && Number.isNaN(this.tokensPerCpuS)) this.tokens++;
    this.started.add(stream);
    if (!this.open && this.started.size === this.streams) this.open = cpuMs(this.peers);
  }

  end(): void {
    if (!this.open || !Number.isNaN(this.tokensPerCpuS)) return;
    const now = cpuMs(this.peers);
    const head = now.head - this.open.head;
    const total = head + now.peers - this.open.peers;
    this.tokensPerCpuS = (this.tokens / total) * 1000;
    this.headShare = head / total;
  }
}


interface TwoPeers {
  readonly head: RunningHead;
  readonly peers: LocalPeers;
  readonly target: Target;
}

async function twoPeers(model: LocalModel, options: { batching: boolean; prefixMb: number }): Promise<TwoPeers> {
  const head = await startHead({
    model,
    tokenizer: await openLocalTokenizer(model),
    name: 'bench',
    port: 0,
    host: '127.0.0.1',
    link: 'relay',
    headLayers: 'none',
    dtype: 'fp32',
    device: 'cpu',
    threads: THREADS,
    batching: options.batching,
    log: () => {},
  });
  const peers = spawnLocalPeers({ count: 2, headUrl: head.peerUrl, joinToken: head.joinToken, link: 'relay', device: 'cpu', threads: THREADS, prefixCacheMb: options.prefixMb, log: () => {} });
  await head.waitForPeers(2, 180_000);
  const target: Target = { vehicle: { head: head.headRunner, route: head.mesh, vocab: model.checkpoint.config.vocabSize }, prefixes: options.prefixMb > 0 ? new PrefixRegistry() : undefined };
  await generate(target, promptOf(4, target.vehicle.vocab, 1), 2); // the peers load their layers
  return { head, peers, target };
}

async function closeTwo(t: TwoPeers): Promise<void> {
  await t.head.close();
  await t.peers.close();
}

const results: Record<string, unknown> = { startedAt: new Date().toISOString(), rounds: ROUNDS, threads: THREADS, decodeTokens: DECODE, cores: os.cpus().length };
const rows: string[] = [];

const smolDir = await generateCheckpoint(path.join(BENCH, '.cache', 'smollm2-135m-shaped'));
process.env.MESHNET_HOME ??= path.join(BENCH, '.cache', 'home');
const model = await openLocalModel(smolDir);
const vocab = model.checkpoint.config.vocabSize;
process.stderr.write(`bench:kv on ${smolDir} (context ${model.checkpoint.config.maxPositionEmbeddings}), ${ROUNDS} rounds, ${THREADS} thread(s), load ${load().toFixed(1)}\n`);

/** Target 1 on one vehicle: rounds of [32-context stream, 2,048-context stream]; the long prompt is prefilled once (a prefix entry), later rounds fork it. */
async function contextRounds(name: string, t: Target): Promise<void> {
  const long = promptOf(LONG_CONTEXT, vocab, 2048);
  const short: number[] = [];
  const longRates: number[] = [];
  const loads: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    loads.push(load());
    short.push(decodeRate(await generate(t, promptOf(SHORT_CONTEXT, vocab, 100 + round), DECODE)));
    const run = await generate(t, long, DECODE);
    longRates.push(decodeRate(run));
    process.stderr.write(`  ${name} round ${round + 1}: ${short.at(-1)!.toFixed(2)} tok/s at ${SHORT_CONTEXT}, ${longRates.at(-1)!.toFixed(2)} at ${LONG_CONTEXT} (cached ${run.cachedTokens}), load ${loads.at(-1)!.toFixed(1)}\n`);
  }
  const ratio = median(longRates) / median(short);
  results[`context/${name}`] = { short, long: longRates, loads, ratio };
  rows.push(`| decode tok/s at ${LONG_CONTEXT} ÷ at ${SHORT_CONTEXT}, ${name} | ≥ 0.75 | ${median(longRates).toFixed(2)} ÷ ${median(short).toFixed(2)} = **${ratio.toFixed(3)}** ${ratio >= 0.75 ? 'met' : 'missed'} | ${loads.map((l) => l.toFixed(1)).join(', ')} |`);
}

if (ONLY.has('context')) {
  const p = await loadLocalPipeline(model, { ranges: [{ start: 0, end: model.checkpoint.config.numLayers }], device: 'cpu', dtype: 'fp32', threads: THREADS, prefixBudgetBytes: 1 << 30 });
  await contextRounds('one process', { vehicle: { head: p.head, route: p.route, vocab }, prefixes: new PrefixRegistry() });
  await p.dispose();
  const two = await twoPeers(model, { batching: true, prefixMb: 1024 });
  await contextRounds('head + 2 peers', two.target);
  await closeTwo(two);
}

if (ONLY.has('batch')) {
  const on = await twoPeers(model, { batching: true, prefixMb: 0 });
  const off = await twoPeers(model, { batching: false, prefixMb: 0 });
  const single: number[] = [];
  const singleOff: number[] = [];
  const aggregate: number[] = [];
  const aggregateOff: number[] = [];
  const cpuSingle: number[] = [];
  const cpuSingleOff: number[] = [];
  const cpuAggregate: number[] = [];
  const loads: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    loads.push(load());
    // The lone stream on each setup, in alternating order (neither always runs first).
    const lone = async (t: TwoPeers, into: number[]) => {
      const window = new CpuWindow(t.peers, 1);
      into.push(decodeRate(await generate(t.target, promptOf(SHORT_CONTEXT, vocab, 300 + round), DECODE, window)));
      (t === on ? cpuSingle : cpuSingleOff).push(window.tokensPerCpuS);
      (headShares[t === on ? 'one stream' : 'one stream, batching off'] ??= []).push(window.headShare);
    };
    const order: [TwoPeers, number[]][] = [[off, singleOff], [on, single]];
    for (const [t, into] of round % 2 === 0 ? order : order.reverse()) await lone(t, into);
    // Both setups serve the same eight streams each round, so neither carries a history the other lacks.
    const streams = async (t: TwoPeers) => {
      const window = new CpuWindow(t.peers, STREAMS);
      const runs = await Promise.all(Array.from({ length: STREAMS }, (_, i) => generate(t.target, promptOf(SHORT_CONTEXT + i, vocab, 400 + round * 10 + i), DECODE, window)));
      (headShares[t === on ? `${STREAMS} streams` : `${STREAMS} streams, batching off`] ??= []).push(window.headShare);
      return { runs, tokensPerCpuS: window.tokensPerCpuS };
    };
    const batched = await streams(on);
    aggregate.push(aggregateRate(batched.runs));
    cpuAggregate.push(batched.tokensPerCpuS);
    aggregateOff.push(aggregateRate((await streams(off)).runs));
    process.stderr.write(
      `  batch round ${round + 1}: one stream ${single.at(-1)!.toFixed(2)} (batching off ${singleOff.at(-1)!.toFixed(2)}), ${STREAMS} streams ${aggregate.at(-1)!.toFixed(2)} tok/s (batching off ${aggregateOff.at(-1)!.toFixed(2)}); tokens per CPU second: one ${cpuSingle.at(-1)!.toFixed(1)} (off ${cpuSingleOff.at(-1)!.toFixed(1)}), ${STREAMS} streams ${cpuAggregate.at(-1)!.toFixed(1)}, load ${loads.at(-1)!.toFixed(1)}\n`,
    );
  }
  const stats = on.head.mesh.peers.map((p) => (p.link as unknown as { stats?: unknown }).stats);
  const speedup = median(aggregate) / median(single);
  const alone = median(single) / median(singleOff);
  const offSpeedup = median(aggregateOff) / median(singleOff);
  const cpuSpeedup = median(cpuAggregate) / median(cpuSingle);
  const cpuAlone = median(cpuSingle) / median(cpuSingleOff);
  results.batch = { headShares, single, singleOff, aggregate, aggregateOff, cpuSingle, cpuSingleOff, cpuAggregate, loads, speedup, offSpeedup, cpuSpeedup, alone, cpuAlone, links: stats };
  rows.push(`| aggregate decode tok/s of ${STREAMS} streams ÷ one stream, head + 2 peers | ≥ 4 | ${median(aggregate).toFixed(2)} ÷ ${median(single).toFixed(2)} = **${speedup.toFixed(2)}×** ${speedup >= 4 ? 'met' : 'missed'} | ${loads.map((l) => l.toFixed(1)).join(', ')} |`);
  rows.push(`| (the same with batching off) | | ${median(aggregateOff).toFixed(2)} ÷ ${median(singleOff).toFixed(2)} = ${offSpeedup.toFixed(2)}× | |`);
  rows.push(`| (the same in decode tokens per CPU second of head + peers, all streams decoding) | | ${median(cpuAggregate).toFixed(2)} ÷ ${median(cpuSingle).toFixed(2)} = ${cpuSpeedup.toFixed(2)}× | |`);
  rows.push(`| one stream, batching on ÷ off | ≥ 0.95 | ${median(single).toFixed(2)} ÷ ${median(singleOff).toFixed(2)} = **${alone.toFixed(3)}** ${alone >= 0.95 ? 'met' : 'missed'} | |`);
  rows.push(`| (the same per CPU second of head + peers) | ≥ 0.95 | ${median(cpuSingle).toFixed(2)} ÷ ${median(cpuSingleOff).toFixed(2)} = **${cpuAlone.toFixed(3)}** ${cpuAlone >= 0.95 ? 'met' : 'missed'} | |`);
  const heads = Object.fromEntries(Object.entries(headShares).map(([k, v]) => [k, median(v)]));
  rows.push(`| (the head's share of that CPU: ${Object.entries(heads).map(([k, v]) => `${k} ${(v * 100).toFixed(0)}%`).join(', ')}) | | | |`);
  await closeTwo(on);
  await closeTwo(off);
}

if (ONLY.has('prefix')) {
  const two = await twoPeers(model, { batching: true, prefixMb: 1024 });
  const cold: number[] = [];
  const warm: number[] = [];
  const cached: number[] = [];
  const loads: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    loads.push(load());
    // A new conversation each round, so the first turn is cold.
    const first = promptOf(CONVERSATION, vocab, 5000 + round);
    const turn1 = await generate(two.target, first, 8);
    cold.push(turn1.ttftMs);
    const turn2 = await generate(two.target, [...first, ...turn1.ids, ...promptOf(24, vocab, 6000 + round)], 8);
    warm.push(turn2.ttftMs);
    cached.push(turn2.cachedTokens);
    process.stderr.write(`  prefix round ${round + 1}: cold TTFT ${turn1.ttftMs.toFixed(0)} ms, second turn ${turn2.ttftMs.toFixed(0)} ms (cached ${turn2.cachedTokens}), load ${loads.at(-1)!.toFixed(1)}\n`);
  }
  const ratio = median(warm) / median(cold);
  results.prefix = { cold, warm, cached, loads, ratio };
  rows.push(`| TTFT of the second turn ÷ cold, ${CONVERSATION}-token conversation, head + 2 peers | ≤ 0.25 | ${median(warm).toFixed(0)} ms ÷ ${median(cold).toFixed(0)} ms = **${ratio.toFixed(3)}** ${ratio <= 0.25 ? 'met' : 'missed'} | ${loads.map((l) => l.toFixed(1)).join(', ')} |`);
  await closeTwo(two);
}

const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const md = [
  `# bench:kv ${results.startedAt}`,
  '',
  `SmolLM2-135M-shaped fp32, context ${model.checkpoint.config.maxPositionEmbeddings}; ${ROUNDS} interleaved rounds, medians; ${THREADS} onnxruntime thread(s) per process; ${os.cpus().length} cores.`,
  '',
  '| target | goal | measured | 1-min load per round |',
  '| --- | --- | --- | --- |',
  ...rows,
  '',
].join('\n');
await mkdir(path.join(BENCH, 'results'), { recursive: true });
await writeFile(path.join(BENCH, 'results', `kv-${stamp}.json`), JSON.stringify(results, null, 2));
await writeFile(path.join(BENCH, 'results', `kv-${stamp}.md`), md);
await writeFile(path.join(BENCH, 'results', 'kv-latest.md'), md);
process.stdout.write(md);
process.exit(0);
