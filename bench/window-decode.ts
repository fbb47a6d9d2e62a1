/**
 * Decode cost against context for a sliding-window model (issue #22): the Gemma-3-1B-shaped
 * checkpoint (generate-checkpoint.ts: 26 layers, five local layers of window 512 to one
 * global) in q4, one process, every layer in one pipeline. One session is prefilled to 32
 * positions, another to 4,096 (in runs of 128, as a peer does); then they decode the same
 * number of tokens, their steps alternating (so load on a shared machine hits both alike),
 * each step timed (median). Local layers hold at most their window, so
 * only the 5 global layers' attention grows with the context.
 *
 *   npm run bench:window                    # 4,096 vs 32, 24 decode steps, q4, 2 threads
 *   npm run bench:window -- --long 2048 --steps 16 --weights q8 --threads 1
 *
 * Prints a JSON line with both rates, their ratio (target ≥ 0.9), the windowed layers' KV
 * positions after each, and the load average at start and end.
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { openLocalModel, loadLocalPipeline } from '../src/node/local-model.ts';
import type { Activations } from '../src/core/runtime/shard-executor.ts';
import { GEMMA_3_1B_SHAPE, generateCheckpoint } from './generate-checkpoint.ts';

const { values } = parseArgs({
  options: {
    long: { type: 'string', default: '4096' },
    short: { type: 'string', default: '32' },
    steps: { type: 'string', default: '24' },
    weights: { type: 'string', default: 'q4' },
    threads: { type: 'string', default: String(Math.max(1, os.availableParallelism())) },
  },
});
const long = Number(values.long);
const short = Number(values.short);
const steps = Number(values.steps);
const weights = values.weights as 'q4' | 'q8' | 'fp32';
const threads = Number(values.threads);
const log = (line: string) => process.stderr.write(`bench:window: ${line}\n`);
const loadStart = os.loadavg()[0];

process.env.MESHNET_HOME ??= path.join(import.meta.dirname, '.cache', 'home');
const dir = await generateCheckpoint(path.join(import.meta.dirname, '.cache', 'gemma-3-1b-shaped'), GEMMA_3_1B_SHAPE);
const model = await openLocalModel(dir);
const { config } = model.checkpoint;
const all = { start: 0, end: config.numLayers };
const loading = performance.now();
const p = await loadLocalPipeline(model, { ranges: [all], device: 'cpu', dtype: 'fp32', weights, threads });
log(`${weights} pipeline of ${config.numLayers} layers loaded in ${((performance.now() - loading) / 1000).toFixed(1)} s (load ${os.loadavg()[0].toFixed(1)})`);
const stage = p.stages[0];
const token = (i: number) => (i * 7919 + 13) % config.vocabSize;

async function forward(sessionId: string, ids: number[], position: number): Promise<number> {
  let hidden: Activations = await p.head.embed(ids);
  hidden = await stage.executor.run({ sessionId, startPosition: position, hidden }, stage.kv.acquire(sessionId, all));
  const logits = await p.head.logits(hidden); // the last position's
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

async function prefill(sessionId: string, context: number): Promise<{ next: number; prefillS: number }> {
  const prefilling = performance.now();
  const next = await forward(sessionId, Array.from({ length: context }, (_, i) => token(i)), 0);
  const prefillS = (performance.now() - prefilling) / 1000;
  log(`${sessionId}: prefill of ${context} in ${prefillS.toFixed(1)} s (load ${os.loadavg()[0].toFixed(1)})`);
  return { next, prefillS };
}

const median = (times: number[]) => [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)]!;
const held = (sessionId: string) => {
  const state = stage.kv.acquire(sessionId, all);
  return { windowPositions: state.capacityOf(config.slidingLayers!.findIndex(Boolean)), globalPositions: state.capacityOf(config.slidingLayers!.findIndex((s) => !s)) };
};

// Both sessions stay live; their decode steps alternate, so a burst of other work on a shared
// machine falls on both alike.
const shortRun = await prefill('short', short);
const longRun = await prefill('long', long);
const times = { short: [] as number[], long: [] as number[] };
let next = { short: shortRun.next, long: longRun.next };
for (let s = 0; s < steps; s++) {
  for (const [id, context] of [['short', short], ['long', long]] as const) {
    const t = performance.now();
    next = { ...next, [id]: await forward(id, [next[id]], context + s) };
    times[id].push(performance.now() - t);
  }
}
const atShort = { tokensPerSecond: 1000 / median(times.short), medianMs: median(times.short), prefillS: shortRun.prefillS, ...held('short') };
const atLong = { tokensPerSecond: 1000 / median(times.long), medianMs: median(times.long), prefillS: longRun.prefillS, ...held('long') };
await p.dispose();
const report = {
  model: 'gemma-3-1b-shaped',
  weights,
  threads,
  steps,
  short: { positions: short, ...atShort },
  long: { positions: long, ...atLong },
  ratio: atLong.tokensPerSecond / atShort.tokensPerSecond,
  target: 0.9,
  loadAverage: { start: loadStart, end: os.loadavg()[0] },
};
log(`decode at ${long}: ${atLong.tokensPerSecond.toFixed(2)} tokens/s, at ${short}: ${atShort.tokensPerSecond.toFixed(2)} tokens/s, ratio ${report.ratio.toFixed(3)} (target ≥ 0.9); load ${loadStart.toFixed(1)} → ${report.loadAverage.end.toFixed(1)}`);
process.stdout.write(`${JSON.stringify(report)}\n`);
