/**
 * `npm run bench [-- --quick] [--link-delay-ms N] [--cold] [--rounds N] [--threads N] [--decode-tokens N]`: meshnet against
 * transformers.js and against the machine's memory bandwidth, in one run.
 *
 * Models: ../shared/models/stories260k and a generated SmolLM2-135M-shaped fp32 checkpoint.
 * Configurations (each in its own process, see bench/measure.ts): meshnet in one process;
 * pipelines of 2 and 3 local peer processes over relay and direct links (quick: 2 over
 * relay); transformers.js generate() on the same weights exported by
 * bench/export-transformers.ts. Writes bench/results/<timestamp>.json and .md, and
 * bench/results/latest.md. Caches (generated checkpoint, exports, meshnet artifacts) live in
 * bench/.cache; `--cold` empties it first.
 */
import { spawn } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { openLocalModel } from '../src/node/local-model.ts';
import type { BandwidthSample } from './bandwidth.ts';
import { exportForTransformers } from './export-transformers.ts';
import { generateCheckpoint } from './generate-checkpoint.ts';
import type { MeasureResult, MeasureSpec } from './measure.ts';
import { bestOf, rowLabel, summarize, type BenchReport, type ModelReport } from './report.ts';
import { renderMarkdown } from './report-markdown.ts';

const BENCH = import.meta.dirname;
const CACHE = path.join(BENCH, '.cache');
const STORIES = path.resolve(BENCH, '../../shared/models/stories260k');

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    cold: { type: 'boolean', default: false },
    'link-delay-ms': { type: 'string' },
    'decode-tokens': { type: 'string' },
    threads: { type: 'string' },
    rounds: { type: 'string' },
  },
});
const quick = values.quick!;
const threads = Number(values.threads ?? Math.max(1, os.availableParallelism()));
const linkDelayMs = values['link-delay-ms'] === undefined ? undefined : Number(values['link-delay-ms']);
const decodeTokens = Number(values['decode-tokens'] ?? (quick ? 32 : 128));
const repeats = Number(values.rounds ?? (quick ? 2 : 3)); // rounds over all configurations
const log = (line: string) => process.stderr.write(`bench: ${line}\n`);

function runChild(script: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(BENCH, script), ...args], {
      env: { ...process.env, MESHNET_HOME: path.join(CACHE, 'home') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(out.trim().split('\n').at(-1)!) : reject(new Error(`${script} exited with ${code}`))));
  });
}

/** Best of three tries each: one stream, then one per core at once (rates added). */
async function measureBandwidth(): Promise<{ oneStream: number; allStreams: number; streams: number }> {
  const streams = Math.max(1, os.availableParallelism());
  let oneStream = 0;
  let allStreams = 0;
  for (let i = 0; i < 3; i++) {
    oneStream = Math.max(oneStream, (JSON.parse(await runChild('bandwidth.ts', ['256'])) as BandwidthSample).bytesPerSecond);
    const all = await Promise.all(Array.from({ length: streams }, () => runChild('bandwidth.ts', ['256'])));
    allStreams = Math.max(allStreams, all.reduce((sum, s) => sum + (JSON.parse(s) as BandwidthSample).bytesPerSecond, 0));
  }
  return { oneStream, allStreams: Math.max(allStreams, oneStream), streams };
}

/** meshnet's compact formats, each in one process and over 2 relay peers (q4 also at the exact accuracy level, one process). */
const FORMAT_ROWS: readonly Pick<MeasureSpec, 'weights' | 'accuracyLevel'>[] = [{ weights: 'fp16' }, { weights: 'q8' }, { weights: 'q4' }];

function configurations(model: string, exportDir: string, longPrompt: number, formats: boolean): MeasureSpec[] {
  // Spinning off is meshnet's setting everywhere (peers share the cores); transformers.js
  // leaves onnxruntime's default (on). Both engines run both ways, so each ratio compares
  // like with like.
  const common = { model, threads, decodeTokens, longPrompt, repeats, spinning: false };
  const specs: MeasureSpec[] = [{ ...common, kind: 'one-process' }, { ...common, kind: 'one-process', spinning: true }];
  const pipelines: [number, 'relay' | 'direct'][] = quick ? [[2, 'relay']] : [[2, 'relay'], [2, 'direct'], [3, 'relay'], [3, 'direct']];
  for (const [peers, link] of pipelines) specs.push({ ...common, kind: 'pipeline', peers, link, linkDelayMs: 0 });
  if (linkDelayMs !== undefined) {
    for (const [peers, link] of pipelines) specs.push({ ...common, kind: 'pipeline', peers, link, linkDelayMs });
  }
  specs.push({ ...common, kind: 'transformers', exportDir, spinning: true }, { ...common, kind: 'transformers', exportDir });
  if (formats) {
    for (const format of FORMAT_ROWS) specs.push({ ...common, kind: 'one-process', ...format });
    specs.push({ ...common, kind: 'one-process', weights: 'q4', accuracyLevel: 0 });
    for (const format of FORMAT_ROWS) specs.push({ ...common, kind: 'pipeline', peers: 2, link: 'relay', linkDelayMs: 0, ...format });
  }
  return specs;
}


async function benchModel(name: string, dir: string): Promise<ModelReport> {
  const model = await openLocalModel(dir);
  const config = model.checkpoint.config;
  const longPrompt = Math.min(512, config.maxPositionEmbeddings - 64);
  const exportDir = path.join(CACHE, 'export', name);
  const exportStart = performance.now();
  await exportForTransformers(dir, exportDir, model.checkpoint);
  log(`${name}: exported for transformers.js in ${((performance.now() - exportStart) / 1000).toFixed(1)} s`);
  // Rounds: every configuration once per round, so a burst of other work on a shared
  // machine hits one round of a configuration, not all of it. Each figure keeps its best round.
  // The compact formats on the SmolLM2-shaped model (stories260k's fp32 peers are the RSS baseline).
  const specs = configurations(dir, exportDir, longPrompt, name !== 'stories260k');
  const rounds: MeasureResult[][] = specs.map(() => []);
  for (let round = 0; round < repeats; round++) {
    for (const [i, spec] of specs.entries()) {
      const started = performance.now();
      const result = JSON.parse(await runChild('measure.ts', [JSON.stringify({ ...spec, repeats: 1 })])) as MeasureResult;
      log(`${name} round ${round + 1}: ${rowLabel(spec)}: ${result.decodeTokensPerSecond.toFixed(1)} tokens/s, TTFT ${result.short.ttftMs.toFixed(0)} / ${result.long.ttftMs.toFixed(0)} ms, load ${os.loadavg()[0].toFixed(1)} (${((performance.now() - started) / 1000).toFixed(1)} s)`);
      rounds[i].push(result);
    }
  }
  const results = rounds.map((r) => bestOf(r));
  return { name, directory: dir, config, tensors: [...model.checkpoint.tensors].map(([tensorName, t]) => ({ name: tensorName, bytes: t.shape.reduce((a, b) => a * b, 1) * 4 })), longPrompt, results };
}

const started = performance.now();
if (values.cold) await rm(CACHE, { recursive: true, force: true });
log(`${quick ? 'quick' : 'full'} run, ${threads} threads per process, ${decodeTokens} decode tokens, ${repeats} rounds${linkDelayMs !== undefined ? `, link delay ${linkDelayMs} ms RTT` : ''}`);
const bandwidth = await measureBandwidth();
log(`memory bandwidth (copy, read+write): ${(bandwidth.oneStream / 1e9).toFixed(1)} GB/s one stream, ${(bandwidth.allStreams / 1e9).toFixed(1)} GB/s ${bandwidth.streams} streams`);
const smolDir = await generateCheckpoint(path.join(CACHE, 'smollm2-135m-shaped'));
const models: ModelReport[] = [];
models.push(await benchModel('stories260k', STORIES));
models.push(await benchModel('smollm2-135m-shaped', smolDir));

const report: BenchReport = summarize({
  startedAt: new Date(Date.now() - (performance.now() - started)).toISOString(),
  durationS: (performance.now() - started) / 1000,
  quick,
  threads,
  decodeTokens,
  repeats,
  linkDelayMs,
  machine: { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model ?? '', totalMemoryBytes: os.totalmem(), node: process.version, platform: `${os.platform()} ${os.release()}` },
  bandwidth,
  models,
});
const results = path.join(BENCH, 'results');
await mkdir(results, { recursive: true });
const stamp = report.startedAt.replace(/[:.]/g, '-');
const markdown = renderMarkdown(report);
await writeFile(path.join(results, `${stamp}.json`), `${JSON.stringify(report, null, 2)}\n`);
await writeFile(path.join(results, `${stamp}.md`), markdown);
await writeFile(path.join(results, 'latest.md'), markdown);
process.stdout.write(markdown);
log(`done in ${report.durationS.toFixed(0)} s: bench/results/${stamp}.{json,md}`);
