/**
 * Decode cost against context for a sliding-window model (issue #22): the Gemma-3-1B-shaped
 * checkpoint (generate-checkpoint.ts: 26 layers, five local layers of window 512 to one
 * global) in q4, one process, every layer in one pipeline. One session is prefilled to 32
 * positions, another to 4,096 (in runs of 128, as a peer does); each then decodes the same
 * number of tokens, timed step by step (median). Local layers hold at most their window, so
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

async function decodeAfter(sessionId: string, context: number): Promise<{ tokensPerSecond: number; medianMs: number; prefillS: number; windowPositions: number; globalPositions: number }> {
  const prefilling = performance.now();
  let next = await forward(sessionId, Array.from({ length: context }, (_, i) => token(i)), 0);
  const prefillS = (performance.now() - prefilling) / 1000;
  log(`${sessionId}: prefill of ${context} in ${prefillS.toFixed(1)} s (load ${os.loadavg()[0].toFixed(1)})`);
  const times: number[] = [];
  for (let s = 0; s < steps; s++) {
    const t = performance.now();
    next = await forward(sessionId, [next], context + s);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  const medianMs = times[Math.floor(times.length / 2)]!;
  const state = stage.kv.acquire(sessionId, all);
  const local = config.slidingLayers!.findIndex(Boolean);
  const global = config.slidingLayers!.findIndex((s) => !s);
  const result = { tokensPerSecond: 1000 / medianMs, medianMs, prefillS, windowPositions: state.capacityOf(local), globalPositions: state.capacityOf(global) };
  stage.kv.release(sessionId);
  return result;
}

const atShort = await decodeAfter('short', short);
const atLong = await decodeAfter('long', long);
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
