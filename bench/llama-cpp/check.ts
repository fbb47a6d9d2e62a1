/**
 * `npm run bench:llama-check [-- --threads N]`: llama.cpp on the bench's F32 GGUFs computes
 * what meshnet computes. That is what proves the GGUF writer's tensor names, metadata and
 * q/k row order on the real engine (test/bench/gguf.test.ts checks the files without it).
 *
 * Per model (stories260k, aidreams260k, the SmolLM2-135M-shaped checkpoint):
 * - greedy tokens: `meshnet generate … --temperature 0 --json` against llama.cpp greedy from
 *   the same prompt ids (meshnet stops at EOS: llama.cpp's must then be an EOS id);
 * - logits after each of the prompt's first positions: meshnet's (its shard graphs, one
 *   position per step) against llama.cpp's raw logits (KV cache F32 and flash attention off
 *   here, not its CPU defaults, which round K and V to f16: so fp32 against fp32): the same
 *   argmax, and a max difference within TOLERANCE of the largest logit;
 * - aidreams260k also against llama2.c's own greedy ids (its README's golden list);
 * - a small random Qwen3-MoE through the qwen3moe writer (same checks: routing included).
 * `--only name,name` runs only those models.
 * Exits 1 when anything differs, 2 when node-llama-cpp cannot be installed.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Activations } from '../../src/core/runtime/shard-executor.ts';
import { loadLocalPipeline, openLocalModel, type LoadedPipeline } from '../../src/node/local-model.ts';
import { existsSync } from 'node:fs';
import { generateCheckpoint } from '../generate-checkpoint.ts';
import { writeTinyCheckpoint } from '../../test/fixtures/checkpoints.ts';
import { tinyMoeCheckpoint } from '../../test/fixtures/moe-checkpoints.ts';
import { promptOf } from '../requests.ts';
import { cachedGguf } from './gguf-cache.ts';
import { ensureNodeLlamaCpp } from './install.ts';
import type { LlamaCheckResult, LlamaCheckSpec } from './measure-llama.ts';

const BENCH = path.resolve(import.meta.dirname, '..');
const CACHE = path.join(BENCH, '.cache');
const MODELS = path.resolve(BENCH, '../test/fixtures/models');
/** Max |meshnet − llama.cpp| logit ÷ max |logit|, per position. */
const TOLERANCE = 2e-5; // measured: ≤ 2.2e-6 on every model and position
/** aidreams260k/README.md: llama2.c run.c `-t 0` after BOS, the first 64 ids. */
const AIDREAMS_GOLDEN = [
  319, 459, 355, 260, 275, 429, 339, 315, 374, 327, 446, 262, 421, 392, 275, 280, 269, 440, 270, 283, 446, 299, 303, 266, 358, 430, 312, 379, 441, 260, 446, 262,
  421, 392, 275, 280, 269, 440, 270, 283, 446, 299, 303, 384, 467, 407, 360, 266, 291, 443, 435, 295, 448, 429, 465, 265, 434, 317, 431, 434, 289, 408, 326, 446,
];

const { values } = parseArgs({ options: { threads: { type: 'string' }, only: { type: 'string' } } });
const threads = Number(values.threads ?? Math.max(1, os.availableParallelism()));
const log = (line: string) => process.stderr.write(`bench:llama-check: ${line}\n`);

function child(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
    proc.on('error', reject);
    proc.on('exit', (code) => (code === 0 ? resolve(out.trim().split('\n').at(-1)!) : reject(new Error(`${args.slice(0, 3).join(' ')} exited with ${code}`))));
  });
}

/** Logits after each of the first `positions` prompt tokens, one position per step (meshnet's decode path). */
async function meshnetLogits(pipeline: LoadedPipeline, promptIds: readonly number[], positions: number): Promise<Float32Array[]> {
  const sessionId = randomUUID();
  const out: Float32Array[] = [];
  for (let p = 0; p < positions; p++) {
    let hidden: Activations = await pipeline.head.embed([promptIds[p]]);
    for (const stage of pipeline.stages) hidden = await stage.executor.run({ sessionId, startPosition: p, hidden }, stage.kv.acquire(sessionId, stage.executor.range));
    out.push(await pipeline.head.logits(hidden));
  }
  for (const stage of pipeline.stages) stage.kv.clear();
  return out;
}

const argmax = (v: ArrayLike<number>) => {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
};

interface Case {
  readonly name: string;
  readonly dir: string;
  readonly promptIds: number[];
  readonly tokens: number;
  readonly golden?: readonly number[];
}

async function checkModel(moduleDir: string, c: Case): Promise<string[]> {
  const problems: string[] = [];
  const model = await openLocalModel(c.dir);
  const config = model.checkpoint.config;
  const gguf = await cachedGguf(CACHE, c.name, c.dir, 'F32');
  const positions = Math.min(4, c.promptIds.length);
  const spec: LlamaCheckSpec = {
    kind: 'llama-cpp-check',
    gguf: gguf.path,
    moduleDir,
    threads,
    contextSize: Math.min(config.maxPositionEmbeddings, c.promptIds.length + c.tokens + 8),
    vocabSize: config.vocabSize,
    promptIds: c.promptIds,
    tokens: c.tokens,
    logitPositions: positions,
    exact: true,
  };
  const llama = JSON.parse(await child(['--import', 'tsx', path.join(import.meta.dirname, 'measure-llama.ts'), JSON.stringify(spec)])) as LlamaCheckResult;
  const generated = JSON.parse(
    await child(
      [path.resolve(BENCH, '../bin/meshnet.js'), 'generate', '--model', c.dir, '--prompt-ids', c.promptIds.join(','), '--max-tokens', String(c.tokens), '--temperature', '0', '--json'],
      { ...process.env, MESHNET_HOME: path.join(CACHE, 'home') },
    ),
  ) as { token_ids: number[]; finish_reason: string };

  const mesh = generated.token_ids;
  const same = mesh.every((id, i) => llama.tokenIds[i] === id);
  const stoppedRight = generated.finish_reason !== 'stop' || config.eosTokenIds.includes(llama.tokenIds[mesh.length]);
  log(`${c.name}: meshnet ${mesh.length} greedy tokens (${generated.finish_reason}), llama.cpp ${llama.tokenIds.length}: ${same && stoppedRight ? 'equal' : 'DIFFERENT'}`);
  if (!same || !stoppedRight) problems.push(`${c.name}: greedy tokens differ\n  meshnet   ${JSON.stringify(mesh)}\n  llama.cpp ${JSON.stringify(llama.tokenIds)}`);
  if (c.golden) {
    const golden = JSON.stringify(llama.tokenIds.slice(0, c.golden.length)) === JSON.stringify(c.golden);
    log(`${c.name}: llama.cpp against llama2.c's golden ${c.golden.length} ids: ${golden ? 'equal' : 'DIFFERENT'}`);
    if (!golden) problems.push(`${c.name}: llama.cpp's greedy ids are not llama2.c's golden ids`);
  }

  const pipeline = await loadLocalPipeline(model, { ranges: [{ start: 0, end: config.numLayers }], device: 'cpu', dtype: 'fp32', threads });
  try {
    const ours = await meshnetLogits(pipeline, c.promptIds, positions);
    for (let p = 0; p < positions; p++) {
      const theirs = llama.logits[p];
      let diff = 0;
      let scale = 0;
      for (let i = 0; i < config.vocabSize; i++) {
        diff = Math.max(diff, Math.abs(ours[p][i] - theirs[i]));
        scale = Math.max(scale, Math.abs(ours[p][i]));
      }
      const relative = diff / scale;
      const sameTop = argmax(ours[p]) === argmax(theirs);
      log(`${c.name}: logits after position ${p}: max |meshnet − llama.cpp| ${diff.toExponential(2)} (${relative.toExponential(2)} of max |logit| ${scale.toFixed(2)}), argmax ${sameTop ? 'equal' : 'DIFFERENT'}`);
      if (!(relative <= TOLERANCE) || !sameTop) problems.push(`${c.name}: logits after position ${p} differ by ${relative.toExponential(2)} of the largest (tolerance ${TOLERANCE})${sameTop ? '' : ', different argmax'}`);
    }
  } finally {
    await pipeline.dispose();
  }
  return problems;
}

const install = await ensureNodeLlamaCpp(undefined, log);
if (!install.ok) {
  log(`cannot run llama.cpp: ${install.reason}`);
  process.exit(2);
}
const smol = await generateCheckpoint(path.join(CACHE, 'smollm2-135m-shaped'));
// A small random Qwen3-MoE (qwen3moe GGUF writer, issue 23): 16 experts, top 4, every layer
// sparse, a sharp router (std 1) so that no token's top-4 set is a near-tie that f32 rounding
// differences between the two engines could flip.
const qwen3moe = path.join(CACHE, 'qwen3moe-check');
if (!existsSync(path.join(qwen3moe, 'config.json'))) {
  await writeTinyCheckpoint(qwen3moe, tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'F32', seed: 23, numExperts: 16, topK: 4, expertSize: 64, numLayers: 4, hiddenSize: 128, tied: true, routerStd: 1 }));
}
const only = values.only?.split(',');
const allCases: Case[] = [
  { name: 'stories260k', dir: path.join(MODELS, 'stories260k'), promptIds: [1], tokens: 64 },
  { name: 'stories260k', dir: path.join(MODELS, 'stories260k'), promptIds: promptOf(32, 512, 2), tokens: 32 },
  { name: 'aidreams260k', dir: path.join(MODELS, 'aidreams260k'), promptIds: [1], tokens: 64, golden: AIDREAMS_GOLDEN },
  { name: 'smollm2-135m-shaped', dir: smol, promptIds: promptOf(32, 49152, 2), tokens: 32 },
  { name: 'qwen3moe-check', dir: qwen3moe, promptIds: [1, 5, 9, 2, 7, 3, 8, 4], tokens: 32 },
];
const cases = only ? allCases.filter((c) => only.includes(c.name)) : allCases;
const problems: string[] = [];
for (const c of cases) problems.push(...(await checkModel(install.dir, c)));
if (problems.length) {
  process.stderr.write(`\n${problems.join('\n')}\n`);
  process.exit(1);
}
log(`llama.cpp and meshnet agree on ${cases.length} prompts of ${new Set(cases.map((c) => c.name)).size} models (threads ${threads})`);
process.exit(0);
