/**
 * Where one decode token of a q4 model goes in one process (issue #22, target (b)): the
 * embedding, the layers and the LM head timed apart (wall and process CPU ms, median over
 * the steps), at a short context. Default: the Gemma-3-1B-shaped checkpoint (262,144 × 1152
 * tied head), 2 threads, 24 steps after a 32-position prefill.
 *
 *   node --import tsx bench/token-split.ts [--steps 24] [--weights q4-b32-acc4,q4-b64-acc4] [--attention gqa|in-place]
 *
 * Several weight specs load one pipeline each; their steps alternate (one run, same load).
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { parseWeightSpecName } from '../src/core/model/quant/weight-format.ts';
import type { AttentionKind } from '../src/core/model/shard-graph.ts';
import { loadLocalPipeline, openLocalModel } from '../src/node/local-model.ts';
import { GEMMA_3_1B_SHAPE, generateCheckpoint } from './generate-checkpoint.ts';

const { values } = parseArgs({ options: { steps: { type: 'string', default: '24' }, weights: { type: 'string', default: 'q4-b32-acc4,q4-b64-acc4' }, attention: { type: 'string' }, threads: { type: 'string', default: String(os.availableParallelism()) } } });
process.env.MESHNET_HOME ??= path.join(import.meta.dirname, '.cache', 'home');
const loadStart = os.loadavg()[0];
const dir = await generateCheckpoint(path.join(import.meta.dirname, '.cache', 'gemma-3-1b-shaped'), GEMMA_3_1B_SHAPE);
const model = await openLocalModel(dir);
const all = { start: 0, end: model.checkpoint.config.numLayers };
const specs = values.weights.split(',').map((name) => ({ name, spec: parseWeightSpecName(name) ?? (() => { throw new Error(`--weights: '${name}' is not a weight spec name`); })() }));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
type Part = 'embed' | 'layers' | 'head';
const runs = [];
for (const { name, spec } of specs) {
  const p = await loadLocalPipeline(model, { ranges: [all], device: 'cpu', dtype: 'fp32', weights: spec, threads: Number(values.threads), ...(values.attention && { attention: values.attention as AttentionKind }) });
  const parts: Record<Part, { wall: number[]; cpu: number[] }> = { embed: { wall: [], cpu: [] }, layers: { wall: [], cpu: [] }, head: { wall: [], cpu: [] } };
  runs.push({ name, p, parts, ids: Array.from({ length: 32 }, (_, i) => (i * 7919 + 13) % model.checkpoint.config.vocabSize), position: 0 });
}
async function timed<T>(parts: Record<Part, { wall: number[]; cpu: number[] }>, part: Part, f: () => Promise<T>, record: boolean): Promise<T> {
  const c = process.cpuUsage();
  const t = performance.now();
  const out = await f();
  if (record) {
    parts[part].wall.push(performance.now() - t);
    const d = process.cpuUsage(c);
    parts[part].cpu.push((d.user + d.system) / 1000);
  }
  return out;
}
for (let step = 0; step <= Number(values.steps); step++) {
  for (const r of runs) {
    const record = step > 0;
    const stage = r.p.stages[0];
    const hidden = await timed(r.parts, 'embed', () => r.p.head.embed(r.ids), record);
    const out = await timed(r.parts, 'layers', () => stage.executor.run({ sessionId: 's', startPosition: r.position, hidden }, stage.kv.acquire('s', all)), record);
    const logits = await timed(r.parts, 'head', () => r.p.head.logits(out), record);
    r.position += r.ids.length;
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
    r.ids = [best];
  }
}
const report = Object.fromEntries(runs.map((r) => [r.name, { attention: (r.p.stages[0].executor as unknown as { mixesLengths: boolean }).mixesLengths ? 'in-place' : 'gqa', ...Object.fromEntries(Object.entries(r.parts).map(([k, v]) => [k, { wallMs: +median(v.wall).toFixed(2), cpuMs: +median(v.cpu).toFixed(2) }])) }]));
console.log(JSON.stringify({ threads: Number(values.threads), steps: Number(values.steps), runs: report, load: { start: loadStart, end: os.loadavg()[0] } }));
for (const r of runs) await r.p.dispose();
