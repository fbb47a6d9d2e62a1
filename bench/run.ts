/**
 * `npm run bench [-- --quick] [--link-delay-ms N[,N…]] [--cold] [--rounds N] [--threads N] [--decode-tokens N] [--skip-llama-cpp] [--models A,B] [--q4-specs q4-b32-acc4,q4-b64-acc4] [--llama-cpp-avx2]`:
 * meshnet against transformers.js, llama.cpp and the machine's memory bandwidth, in one run.
 *
 * Models (`--models`, default `stories260k,smollm2-135m-shaped`): test/fixtures/models/stories260k,
 * a generated SmolLM2-135M-shaped fp32 checkpoint, and `llama-3.2-1b-shaped`, a generated
 * Llama-3.2-1B-shaped bf16 one (2.47 GB, written once into bench/.cache): bandwidth-bound,
 * so it runs q8 and q4 only (one process and 2 relay peers) beside llama.cpp Q8_0 and Q4_0,
 * with no fp32 or transformers.js rows (an fp32 export of it would be 5 GB).
 * `--q4-specs` (bandwidth-bound models only): their q4 one-process row once per weight spec
 * name listed (block size and accuracy level, each row a process of its own), and the 2-peer
 * row in the first one listed; without it, one q4 row in meshnet's default spec.
 * `--llama-cpp-avx2`: every llama.cpp row also on its CPU backends up to AVX2 only
 * (bench/llama-cpp/cpu-variant.ts), beside the one on the best backend for this CPU.
 * Configurations (each in its own process, see bench/measure.ts): meshnet in one process,
 * once per weight format this build serves (bench/meshnet-weights.ts; the others are listed
 * as not available); pipelines of 2 and 3 local peer processes over relay and direct links
 * (quick: 2 over relay); transformers.js generate() on the same weights exported by
 * bench/export-transformers.ts; llama.cpp (node-llama-cpp, installed on first use into
 * bench/.llama-cpp, see bench/llama-cpp/install.ts) on GGUF files of the same weights in
 * F32, Q8_0 and Q4_0 (bench/gguf), with the same thread count. Writes
 * bench/results/<timestamp>.json and .md, and bench/results/latest.md. Caches (generated
 * checkpoint, exports, GGUFs, meshnet artifacts) live in bench/.cache; `--cold` empties it first.
 */
import { spawn } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { openLocalModel } from '../src/node/local-model.ts';
import type { BandwidthSample } from './bandwidth.ts';
import type { GrammarMaskReport } from './grammar-mask.ts';
import { exportForTransformers } from './export-transformers.ts';
import { GEMMA_3_1B_SHAPE, generateCheckpoint, LLAMA_3_2_1B_SHAPE } from './generate-checkpoint.ts';
import type { GgufWeights } from './gguf/llama-gguf.ts';
import { cachedGguf, type CachedGguf } from './llama-cpp/gguf-cache.ts';
import { avx2Install } from './llama-cpp/cpu-variant.ts';
import { ensureNodeLlamaCpp, NODE_LLAMA_CPP_VERSION, type LlamaCppInstall } from './llama-cpp/install.ts';
import type { MeasureResult, MeasureSpec } from './measure.ts';
import { meshnetWeightsInThisBuild, parseQ4Specs } from './meshnet-weights.ts';
import { bestOf, rowLabel, summarize, type BenchReport, type ModelReport, type UnavailableRow } from './report.ts';
import { renderMarkdown } from './report-markdown.ts';

const BENCH = import.meta.dirname;
const CACHE = path.join(BENCH, '.cache');
const STORIES = path.resolve(BENCH, '../test/fixtures/models/stories260k');

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    cold: { type: 'boolean', default: false },
    'link-delay-ms': { type: 'string' },
    'decode-tokens': { type: 'string' },
    threads: { type: 'string' },
    rounds: { type: 'string' },
    'skip-llama-cpp': { type: 'boolean', default: false },
    models: { type: 'string', default: 'stories260k,smollm2-135m-shaped' },
    'q4-specs': { type: 'string' },
    'llama-cpp-avx2': { type: 'boolean', default: false },
  },
});
/** What a model's rows are: every configuration, or (bandwidth-bound models) the compact formats only. */
interface ModelPlan {
  /** fp32, spinning and transformers.js rows, and the pipelines of every link. */
  readonly full: boolean;
  /** The compact formats' rows (q4 at level 0, each format over 2 relay peers). */
  readonly compact: boolean;
  readonly llamaCppTypes: readonly GgufWeights[];
  /** Bandwidth-bound models: the compact formats measured (default q8 and q4). */
  readonly formats?: readonly ('q8' | 'q4')[];
}
const q4Specs = parseQ4Specs(values['q4-specs']);
const BENCH_MODELS = ['stories260k', 'smollm2-135m-shaped', 'llama-3.2-1b-shaped', 'gemma-3-1b-shaped'] as const;
const benchModels = values.models!.split(',').map((m) => m.trim());
for (const m of benchModels) if (!(BENCH_MODELS as readonly string[]).includes(m)) throw new Error(`--models: '${m}' is not one of ${BENCH_MODELS.join(', ')}`);
/** The llama.cpp types measured beside meshnet (the writer also does F16). */
const LLAMA_CPP_TYPES: readonly GgufWeights[] = ['F32', 'Q8_0', 'Q4_0'];
const quick = values.quick!;
const threads = Number(values.threads ?? Math.max(1, os.availableParallelism()));
/** `--link-delay-ms 10,20`: every pipeline also runs with each of these added round-trip times. */
const linkDelaysMs = parseDelays(values['link-delay-ms']);
const linkDelayMs = linkDelaysMs?.[0];
const decodeTokens = Number(values['decode-tokens'] ?? (quick ? 32 : 128));
const repeats = Number(values.rounds ?? (quick ? 2 : 3)); // rounds over all configurations
const log = (line: string) => process.stderr.write(`bench: ${line}\n`);

/** A comma-separated list of round-trip times in ms (`10` or `10,20`); a malformed one stops the bench. */
function parseDelays(value: string | undefined): number[] | undefined {
  if (value === undefined) return undefined;
  const delays = value.split(',').map((part) => Number(part.trim()));
  if (delays.length === 0 || delays.some((d) => !Number.isFinite(d) || d < 0)) throw new Error(`--link-delay-ms: '${value}' is not a comma-separated list of milliseconds ≥ 0`);
  return delays;
}

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

function configurations(model: string, exportDir: string, longPrompt: number, ggufs: readonly CachedGguf[], llama: { dir: string; vocabSize: number; contextSize: number } | undefined, plan: ModelPlan): MeasureSpec[] {
  // Spinning off is meshnet's setting everywhere (peers share the cores); transformers.js
  // leaves onnxruntime's default (on). Both engines run both ways, so each ratio compares
  // like with like.
  const common = { model, threads, decodeTokens, longPrompt, repeats, spinning: false };
  const llamaSpecs = (): MeasureSpec[] =>
    llama
      ? ggufs.flatMap((gguf) => {
          const spec = { ...common, kind: 'llama-cpp' as const, gguf: gguf.path, ggufWeights: gguf.weights, moduleDir: llama.dir, vocabSize: llama.vocabSize, contextSize: llama.contextSize, weightBytesPerToken: gguf.weightBytesPerToken };
          return llamaAvx2?.ok ? [spec, { ...spec, moduleDir: llamaAvx2.dir, cpuVariant: 'avx2' as const }] : [spec];
        })
      : [];
  if (!plan.full) {
    // Bandwidth-bound: q8 and q4, one process and 2 relay peers each; q4 once per `--q4-specs` name
    // in one process, and its 2 peers in the first name.
    const formats: readonly string[] = plan.formats ?? ['q8', 'q4'];
    const compactFormats = meshnetWeights.available.filter((w) => formats.includes(w));
    const specs: MeasureSpec[] = compactFormats.flatMap((weights): MeasureSpec[] => {
      const named = weights === 'q4' && q4Specs ? q4Specs.map((weightSpec) => ({ weights, weightSpec })) : [{ weights }];
      return [
        ...named.map((w): MeasureSpec => ({ ...common, kind: 'one-process', ...w })),
        { ...common, kind: 'pipeline', peers: 2, link: 'relay', linkDelayMs: 0, ...named[0] },
      ];
    });
    return [...specs, ...llamaSpecs()];
  }
  const compact = plan.compact;
  const specs: MeasureSpec[] = [{ ...common, kind: 'one-process' }, { ...common, kind: 'one-process', spinning: true }];
  for (const weights of meshnetWeights.available) if (weights !== 'fp32') specs.push({ ...common, kind: 'one-process', weights });
  const pipelines: [number, 'relay' | 'direct'][] = quick ? [[2, 'relay']] : [[2, 'relay'], [2, 'direct'], [3, 'relay'], [3, 'direct']];
  for (const [peers, link] of pipelines) specs.push({ ...common, kind: 'pipeline', peers, link, linkDelayMs: 0 });
  for (const delay of linkDelaysMs ?? []) {
    for (const [peers, link] of pipelines) specs.push({ ...common, kind: 'pipeline', peers, link, linkDelayMs: delay });
  }
  specs.push({ ...common, kind: 'transformers', exportDir, spinning: true }, { ...common, kind: 'transformers', exportDir });
  if (compact) {
    // The compact formats' other rows (issue #12): q4 at the exact accuracy level in one
    // process, and each format over 2 relay peers (their RSS against stories260k's fp32 peers).
    if (meshnetWeights.available.includes('q4')) specs.push({ ...common, kind: 'one-process', weights: 'q4', accuracyLevel: 0 });
    for (const weights of meshnetWeights.available) if (weights !== 'fp32') specs.push({ ...common, kind: 'pipeline', peers: 2, link: 'relay', linkDelayMs: 0, weights });
  }
  specs.push(...llamaSpecs());
  return specs;
}


async function benchModel(name: string, dir: string, plan: ModelPlan): Promise<ModelReport> {
  const model = await openLocalModel(dir);
  const config = model.checkpoint.config;
  const longPrompt = Math.min(512, config.maxPositionEmbeddings - 64);
  const exportDir = path.join(CACHE, 'export', name);
  if (plan.full) {
    const exportStart = performance.now();
    await exportForTransformers(dir, exportDir, model.checkpoint);
    log(`${name}: exported for transformers.js in ${((performance.now() - exportStart) / 1000).toFixed(1)} s`);
  }
  const ggufs: CachedGguf[] = [];
  if (llamaCpp.ok) {
    for (const weights of plan.llamaCppTypes) {
      const ggufStart = performance.now();
      const gguf = await cachedGguf(CACHE, name, dir, weights);
      ggufs.push(gguf);
      if (gguf.written) log(`${name}: wrote ${path.basename(gguf.path)} (${(gguf.fileBytes / 2 ** 20).toFixed(1)} MiB) in ${((performance.now() - ggufStart) / 1000).toFixed(1)} s${gguf.fallbacks.length ? `; F16 where rows are not whole blocks: ${gguf.fallbacks.join(', ')}` : ''}`);
    }
  }
  // The longest request, plus slack; llama.cpp rounds the context up to a multiple of 256.
  const contextSize = Math.min(config.maxPositionEmbeddings, Math.max(longPrompt + 1, 32 + decodeTokens) + 8);
  const llama = llamaCpp.ok ? { dir: llamaCpp.dir, vocabSize: config.vocabSize, contextSize } : undefined;
  // Rounds: every configuration once per round, so a burst of other work on a shared
  // machine hits one round of a configuration, not all of it. Each figure keeps its best round.
  const specs = configurations(dir, exportDir, longPrompt, ggufs, llama, plan);
  const rounds: MeasureResult[][] = specs.map(() => []);
  const unavailable: UnavailableRow[] = meshnetWeights.unavailable.map((u) => ({ label: rowLabel({ kind: 'one-process', weights: u.weights } as MeasureSpec), reason: u.reason }));
  if (!llamaCpp.ok) for (const weights of plan.llamaCppTypes) unavailable.push({ label: `llama.cpp ${weights}`, reason: `skipped: ${llamaCpp.reason}` });
  const failed = new Set<number>();
  for (let round = 0; round < repeats; round++) {
    for (const [i, spec] of specs.entries()) {
      if (failed.has(i)) continue;
      const started = performance.now();
      const script = spec.kind === 'llama-cpp' ? 'llama-cpp/measure-llama.ts' : 'measure.ts';
      let result: MeasureResult;
      try {
        result = JSON.parse(await runChild(script, [JSON.stringify({ ...spec, repeats: 1 })])) as MeasureResult;
      } catch (error) {
        // Only the compact formats and llama.cpp may fail without failing the bench: a row of
        // what this machine or build cannot run, not a crash. meshnet fp32 and transformers.js must run.
        const optional = spec.kind === 'llama-cpp' || ((spec.kind === 'one-process' || spec.kind === 'pipeline') && (spec.weights ?? 'fp32') !== 'fp32');
        if (!optional) throw error;
        log(`${name} round ${round + 1}: ${rowLabel(spec)} failed: ${(error as Error).message}`);
        unavailable.push({ label: rowLabel(spec), reason: `failed: ${(error as Error).message}` });
        failed.add(i);
        continue;
      }
      log(`${name} round ${round + 1}: ${rowLabel(spec)}: ${result.decodeTokensPerSecond.toFixed(1)} tokens/s, TTFT ${result.short.ttftMs.toFixed(0)} / ${result.long.ttftMs.toFixed(0)} ms, peak RSS ${(result.peakRssBytes / 2 ** 20).toFixed(0)} MiB, load ${os.loadavg()[0].toFixed(1)} (${((performance.now() - started) / 1000).toFixed(1)} s)`);
      rounds[i].push(result);
    }
  }
  const results = rounds.filter((r, i) => !failed.has(i) && r.length > 0).map((r) => bestOf(r));
  return {
    name,
    directory: dir,
    config,
    tensors: [...model.checkpoint.tensors].map(([tensorName, t]) => ({ name: tensorName, bytes: t.shape.reduce((a, b) => a * b, 1) * 4 })),
    longPrompt,
    results,
    unavailable,
    ggufs: ggufs.map((g) => ({ weights: g.weights, fileBytes: g.fileBytes, weightBytesPerToken: g.weightBytesPerToken, fallbacks: g.fallbacks })),
  };
}

const started = performance.now();
if (values.cold) await rm(CACHE, { recursive: true, force: true });
log(`${quick ? 'quick' : 'full'} run, ${threads} threads per process, ${decodeTokens} decode tokens, ${repeats} rounds${linkDelaysMs ? `, link delay ${linkDelaysMs.join(', ')} ms RTT` : ''}${q4Specs ? `, bandwidth-bound q4 as ${q4Specs.join(', ')}` : ''}`);
const meshnetWeights = meshnetWeightsInThisBuild();
log(`meshnet weight formats: ${meshnetWeights.available.join(', ')}${meshnetWeights.unavailable.length ? `; ${meshnetWeights.unavailable.map((u) => `${u.weights} ${u.reason}`).join('; ')}` : ''}`);
const llamaCpp: LlamaCppInstall = values['skip-llama-cpp']
  ? { ok: false, dir: '', reason: '--skip-llama-cpp' }
  : await ensureNodeLlamaCpp(undefined, log);
if (!llamaCpp.ok) log(`llama.cpp rows skipped: ${llamaCpp.reason}`);
else log(`llama.cpp: node-llama-cpp ${NODE_LLAMA_CPP_VERSION} from ${path.relative(process.cwd(), llamaCpp.dir) || llamaCpp.dir}, prebuilt CPU binary, ${threads} threads`);
const llamaAvx2 = llamaCpp.ok && values['llama-cpp-avx2'] ? await avx2Install(llamaCpp.dir) : undefined;
if (llamaAvx2) log(llamaAvx2.ok ? `llama.cpp AVX2 kernels: ${path.relative(process.cwd(), llamaAvx2.dir) || llamaAvx2.dir} (the install without its AVX-512/VNNI/AMX CPU backends)` : `--llama-cpp-avx2: no AVX2 rows: ${llamaAvx2.reason}`);
const bandwidth = await measureBandwidth();
log(`memory bandwidth (copy, read+write): ${(bandwidth.oneStream / 1e9).toFixed(1)} GB/s one stream, ${(bandwidth.allStreams / 1e9).toFixed(1)} GB/s ${bandwidth.streams} streams`);
log('grammar mask cost per token (xgrammar, 49,152 and 151,936 vocabularies)');
const grammarMask = JSON.parse(await runChild('grammar-mask.ts', ['--steps', quick ? '200' : '600'])) as GrammarMaskReport;
const models: ModelReport[] = [];
for (const name of benchModels) {
  if (name === 'stories260k') models.push(await benchModel(name, STORIES, { full: true, compact: false, llamaCppTypes: LLAMA_CPP_TYPES }));
  if (name === 'smollm2-135m-shaped') models.push(await benchModel(name, await generateCheckpoint(path.join(CACHE, name)), { full: true, compact: true, llamaCppTypes: LLAMA_CPP_TYPES }));
  if (name === 'llama-3.2-1b-shaped') {
    const writing = performance.now();
    const dir = await generateCheckpoint(path.join(CACHE, name), LLAMA_3_2_1B_SHAPE);
    log(`${name}: checkpoint ready in ${((performance.now() - writing) / 1000).toFixed(1)} s`);
    models.push(await benchModel(name, dir, { full: false, compact: true, llamaCppTypes: ['Q8_0', 'Q4_0'] }));
  }
  if (name === 'gemma-3-1b-shaped') {
    // Issue #22: Gemma 3's shape (local/global layers, head 256, 262,144 vocabulary), q4 beside llama.cpp's gemma3 Q4_0.
    const writing = performance.now();
    const dir = await generateCheckpoint(path.join(CACHE, name), GEMMA_3_1B_SHAPE);
    log(`${name}: checkpoint ready in ${((performance.now() - writing) / 1000).toFixed(1)} s`);
    models.push(await benchModel(name, dir, { full: false, compact: true, llamaCppTypes: ['Q4_0'], formats: ['q4'] }));
  }
}

const report: BenchReport = summarize({
  startedAt: new Date(Date.now() - (performance.now() - started)).toISOString(),
  durationS: (performance.now() - started) / 1000,
  quick,
  threads,
  decodeTokens,
  repeats,
  linkDelayMs,
  linkDelaysMs,
  machine: { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model ?? '', totalMemoryBytes: os.totalmem(), node: process.version, platform: `${os.platform()} ${os.release()}` },
  bandwidth,
  grammarMask,
  llamaCpp: llamaCpp.ok ? { version: NODE_LLAMA_CPP_VERSION, status: 'measured' } : { version: NODE_LLAMA_CPP_VERSION, status: 'skipped', reason: llamaCpp.reason },
  meshnetWeights,
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
