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
 * `--attention gqa,in-place` loads one pipeline per attention kind (GroupQueryAttention, or
 * plain ops reading the pooled KV in place: model/in-place-attention.ts) and alternates all
 * four sessions' steps, so the kinds are compared in one run too.
 *
 * Prints a JSON line with, per kind, both rates, their ratio (target ≥ 0.9) by the wall clock
 * and by this process's CPU time per step (process.cpuUsage: what a loaded machine disturbs
 * least), the windowed layers' KV positions after each, and the load average at start and end.
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { openLocalModel, loadLocalPipeline } from '../src/node/local-model.ts';
import type { AttentionKind } from '../src/core/model/shard-graph.ts';
import type { Activations } from '../src/core/runtime/shard-executor.ts';
import { GEMMA_3_1B_SHAPE, generateCheckpoint } from './generate-checkpoint.ts';

const { values } = parseArgs({
  options: {
    long: { type: 'string', default: '4096' },
    short: { type: 'string', default: '32' },
    steps: { type: 'string', default: '24' },
    weights: { type: 'string', default: 'q4' },
    threads: { type: 'string', default: String(Math.max(1, os.availableParallelism())) },
    attention: { type: 'string', default: 'gqa' },
  },
});
const long = Number(values.long);
const short = Number(values.short);
const steps = Number(values.steps);
const weights = values.weights as 'q4' | 'q8' | 'fp32';
const threads = Number(values.threads);
const kinds = values.attention.split(',') as AttentionKind[];
for (const kind of kinds) if (kind !== 'gqa' && kind !== 'in-place') throw new Error(`--attention takes gqa and/or in-place, not '${kind}'`);
const log = (line: string) => process.stderr.write(`bench:window: ${line}\n`);
const loadStart = os.loadavg()[0];

process.env.MESHNET_HOME ??= path.join(import.meta.dirname, '.cache', 'home');
const dir = await generateCheckpoint(path.join(import.meta.dirname, '.cache', 'gemma-3-1b-shaped'), GEMMA_3_1B_SHAPE);
const model = await openLocalModel(dir);
const { config } = model.checkpoint;
const all = { start: 0, end: config.numLayers };
const token = (i: number) => (i * 7919 + 13) % config.vocabSize;
const median = (times: number[]) => [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)]!;

const pipelines = new Map<AttentionKind, Awaited<ReturnType<typeof loadLocalPipeline>>>();
for (const kind of kinds) {
  const loading = performance.now();
  pipelines.set(kind, await loadLocalPipeline(model, { ranges: [all], device: 'cpu', dtype: 'fp32', weights, threads, attention: kind }));
  log(`${weights} ${kind} pipeline of ${config.numLayers} layers loaded in ${((performance.now() - loading) / 1000).toFixed(1)} s (load ${os.loadavg()[0].toFixed(1)})`);
}

async function forward(kind: AttentionKind, sessionId: string, ids: number[], position: number): Promise<number> {
  const p = pipelines.get(kind)!;
  const stage = p.stages[0];
  let hidden: Activations = await p.head.embed(ids);
  hidden = await stage.executor.run({ sessionId, startPosition: position, hidden }, stage.kv.acquire(sessionId, all));
  const logits = await p.head.logits(hidden); // the last position's
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

interface Run { kind: AttentionKind; id: string; context: number; next: number; prefillS: number; wall: number[]; cpu: number[] }
const runs: Run[] = [];
for (const kind of kinds) {
  for (const [id, context] of [['short', short], ['long', long]] as const) {
    const prefilling = performance.now();
    const next = await forward(kind, id, Array.from({ length: context }, (_, i) => token(i)), 0);
    const prefillS = (performance.now() - prefilling) / 1000;
    log(`${kind} ${id}: prefill of ${context} in ${prefillS.toFixed(1)} s (load ${os.loadavg()[0].toFixed(1)})`);
    runs.push({ kind, id, context, next, prefillS, wall: [], cpu: [] });
  }
}
// All sessions stay live; their decode steps alternate, so a burst of other work on a shared
// machine falls on all alike.
for (let s = 0; s < steps; s++) {
  for (const run of runs) {
    const t = performance.now();
    const c = process.cpuUsage();
    run.next = await forward(run.kind, run.id, [run.next], run.context + s);
    const used = process.cpuUsage(c);
    run.wall.push(performance.now() - t);
    run.cpu.push((used.user + used.system) / 1000);
  }
}
const held = (kind: AttentionKind, sessionId: string) => {
  const state = pipelines.get(kind)!.stages[0].kv.acquire(sessionId, all);
  return { windowPositions: state.capacityOf(config.slidingLayers!.findIndex(Boolean)), globalPositions: state.capacityOf(config.slidingLayers!.findIndex((x) => !x)) };
};
const row = (run: Run) => ({ positions: run.context, tokensPerSecond: 1000 / median(run.wall), medianMs: median(run.wall), cpuMsPerStep: median(run.cpu), prefillS: run.prefillS, ...held(run.kind, run.id) });
const byKind: Record<string, unknown> = {};
for (const kind of kinds) {
  const at = (id: string) => row(runs.find((r) => r.kind === kind && r.id === id)!);
  const s = at('short');
  const l = at('long');
  byKind[kind] = { short: s, long: l, ratio: l.tokensPerSecond / s.tokensPerSecond, cpuRatio: s.cpuMsPerStep / l.cpuMsPerStep };
  log(`${kind}: decode at ${long}: ${l.tokensPerSecond.toFixed(2)} tokens/s (${l.cpuMsPerStep.toFixed(1)} CPU ms), at ${short}: ${s.tokensPerSecond.toFixed(2)} tokens/s (${s.cpuMsPerStep.toFixed(1)} CPU ms); ratio ${(l.tokensPerSecond / s.tokensPerSecond).toFixed(3)} wall, ${(s.cpuMsPerStep / l.cpuMsPerStep).toFixed(3)} CPU (target ≥ 0.9)`);
}
for (const p of pipelines.values()) await p.dispose();
const report = {
  model: 'gemma-3-1b-shaped',
  weights,
  threads,
  steps,
  attention: byKind,
  target: 0.9,
  loadAverage: { start: loadStart, end: os.loadavg()[0] },
};
log(`load ${loadStart.toFixed(1)} → ${report.loadAverage.end.toFixed(1)}`);
process.stdout.write(`${JSON.stringify(report)}\n`);
