/**
 * MoE sparsity bench (issue 23): decode tokens/s of a Qwen3-MoE-shaped random checkpoint
 * against the dense Qwen3 of the same layer bytes (its intermediate size = experts × expert
 * size), each weight format in one process and over local peer processes. Each row is
 * bench/measure.ts in a process of its own (the main bench's measurement: greedy requests
 * from the same token ids, decode tokens/s = 1000 ÷ the median inter-token interval).
 * Defaults are the issue's shape: 8 layers, hidden 1024, 64 experts of 512, top 8, vocab
 * 151,936 (tied embeddings). llama.cpp (node-llama-cpp, bench/llama-cpp) runs the same MoE
 * weights as a `qwen3moe` GGUF (bench/gguf/qwen3moe-gguf.ts) in Q4_0 beside q4 and Q8_0 beside
 * q8, with the same requests and thread count; meshnet ÷ llama.cpp is printed per format and
 * peer count. Usage:
 *   npm run bench:moe -- [--weights q4,q8] [--peers 0,2] [--layers 8] [--hidden 1024] [--experts 64]
 *                        [--expert-size 512] [--top 8] [--vocab 151936] [--tokens 32] [--threads 1]
 *                        [--skip-llama-cpp] [--skip-dense]
 * The checkpoints are written once into bench/.cache/moe-<shape>/ (2 × ~1.9 GB at the default
 * shape), the packed artifacts cached in bench/.cache/moe-home. Prints one row per
 * configuration with the load average, then MoE ÷ dense per format and peer count.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { TINY_PRESETS, writeTinyCheckpoint } from '../test/fixtures/checkpoints.ts';
import { tinyMoeCheckpoint } from '../test/fixtures/moe-checkpoints.ts';
import type { MeasureResult, MeasureSpec } from './measure.ts';
import { resolveWeightSpec } from '../src/core/model/quant/weight-format.ts';
import { getShardArtifact } from '../src/node/artifact-cache.ts';
import { openLocalModel } from '../src/node/local-model.ts';
import { cachedGguf } from './llama-cpp/gguf-cache.ts';
import { ensureNodeLlamaCpp } from './llama-cpp/install.ts';
import type { GgufWeights } from './gguf/llama-gguf.ts';

const BENCH = import.meta.dirname;
const CACHE = path.join(BENCH, '.cache');
const { values } = parseArgs({
  options: {
    weights: { type: 'string', default: 'q4,q8' },
    peers: { type: 'string', default: '0,2' },
    layers: { type: 'string', default: '8' },
    hidden: { type: 'string', default: '1024' },
    experts: { type: 'string', default: '64' },
    'expert-size': { type: 'string', default: '512' },
    top: { type: 'string', default: '8' },
    vocab: { type: 'string', default: '151936' },
    tokens: { type: 'string', default: '32' },
    threads: { type: 'string', default: '1' },
    'skip-llama-cpp': { type: 'boolean', default: false },
    'skip-dense': { type: 'boolean', default: false },
  },
});
const [layers, hidden, experts, expertSize, top, vocab, tokens, threads] = [values.layers, values.hidden, values.experts, values['expert-size'], values.top, values.vocab, values.tokens, values.threads].map(Number);
const formats = values.weights.split(',') as ('q4' | 'q8' | 'fp32' | 'fp16')[];
const peerCounts = values.peers.split(',').map(Number);
for (const f of formats) if (!['q4', 'q8', 'fp16', 'fp32'].includes(f)) throw new Error(`--weights: '${f}' is not q4, q8, fp16 or fp32`);
for (const n of [layers, hidden, experts, expertSize, top, vocab, tokens, threads, ...peerCounts]) if (!Number.isInteger(n) || n < 0) throw new Error(`not a whole number ≥ 0: ${n}`);

const shapeKey = `l${layers}-h${hidden}-e${experts}x${expertSize}-k${top}-v${vocab}`;
const dir = path.join(CACHE, `moe-${shapeKey}`);
const shape = { dtype: 'BF16' as const, seed: 7, numLayers: layers, hiddenSize: hidden, numHeads: 8, numKvHeads: 4, headDim: hidden / 8, vocabSize: vocab, tied: true };
const checkpoints = {
  'qwen3-moe': { dir: path.join(dir, 'moe'), options: { ...tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'BF16', seed: 7, numExperts: experts, topK: top, expertSize, numLayers: layers, hiddenSize: hidden, tied: true }), ...shape } },
  'qwen3 dense, same bytes': { dir: path.join(dir, 'dense'), options: { ...TINY_PRESETS.qwen3, ...shape, intermediateSize: experts * expertSize } },
};
if (values['skip-dense']) delete (checkpoints as Partial<typeof checkpoints>)['qwen3 dense, same bytes'];
for (const [name, c] of Object.entries(checkpoints)) {
  if (existsSync(path.join(c.dir, 'config.json'))) continue;
  process.stderr.write(`writing the ${name} checkpoint into ${c.dir}\n`);
  await writeTinyCheckpoint(c.dir, c.options);
}

const HOME = path.join(CACHE, 'moe-home');

/**
 * Builds the peers' artifacts (`peers` equal layer ranges) before a pipeline row: a peer packing
 * a q8 range of this size from BF16 took over the mesh's 30 s ready timeout at load 12.
 */
async function prebuild(model: string, weights: string, peers: number): Promise<void> {
  const local = await openLocalModel(model);
  const spec = resolveWeightSpec(local.checkpoint.config, 'fp32', { format: weights as 'q4' });
  const per = Math.ceil(layers / peers);
  for (let start = 0; start < layers; start += per) {
    await getShardArtifact(local.checkpoint, local.key, { kind: 'layers', range: { start, end: Math.min(layers, start + per) } }, 'fp32', spec, HOME);
  }
}

function measure(spec: MeasureSpec): Promise<MeasureResult> {
  const script = spec.kind === 'llama-cpp' ? path.join(BENCH, 'llama-cpp', 'measure-llama.ts') : path.join(BENCH, 'measure.ts');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, JSON.stringify(spec)], {
      env: { ...process.env, MESHNET_HOME: HOME },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1)!) as MeasureResult) : reject(new Error(`measure.ts exited with ${code}`))));
  });
}

const llamaCpp = values['skip-llama-cpp'] ? undefined : await ensureNodeLlamaCpp(undefined, (line) => process.stderr.write(`${line}\n`));
if (llamaCpp && !llamaCpp.ok) console.log(`llama.cpp rows skipped: ${llamaCpp.reason}`);
const GGUF_TYPE: Record<string, GgufWeights> = { q4: 'Q4_0', q8: 'Q8_0', fp16: 'F16', fp32: 'F32' };

/** llama.cpp on the MoE checkpoint's GGUF of `weights`' ggml type: decode tokens/s, or undefined when it cannot run. */
async function llamaCppRow(weights: string): Promise<number | undefined> {
  if (!llamaCpp?.ok) return undefined;
  const moe = checkpoints['qwen3-moe'];
  try {
    const gguf = await cachedGguf(CACHE, `moe-${shapeKey}`, moe.dir, GGUF_TYPE[weights]);
    const spec: MeasureSpec = {
      model: moe.dir, threads, spinning: false, repeats: 2, decodeTokens: tokens, longPrompt: 32,
      kind: 'llama-cpp', gguf: gguf.path, ggufWeights: gguf.weights, moduleDir: llamaCpp.dir, vocabSize: vocab, contextSize: 32 + tokens + 16, weightBytesPerToken: gguf.weightBytesPerToken,
    };
    const r = await measure(spec);
    console.log(`llama.cpp qwen3moe ${gguf.weights}, one process, ${(gguf.weightBytesPerToken / 2 ** 20).toFixed(1)} MiB read per token: decode ${r.decodeTokensPerSecond.toFixed(2)} tokens/s (load ${r.loadAverage.map((l) => l.toFixed(1)).join(' → ')})`);
    return r.decodeTokensPerSecond;
  } catch (error) {
    console.log(`llama.cpp ${GGUF_TYPE[weights]}: failed (${error instanceof Error ? error.message : String(error)})`);
    return undefined;
  }
}

console.log(`shape ${shapeKey}, threads ${threads}, ${tokens} decode tokens`);
const rate = new Map<string, number>();
for (const weights of formats) {
  const llama = await llamaCppRow(weights);
  for (const peers of peerCounts) {
    for (const [name, c] of Object.entries(checkpoints)) {
      const common = { model: c.dir, threads, spinning: false, repeats: 2, decodeTokens: tokens, longPrompt: 32, weights };
      const spec: MeasureSpec = peers === 0 ? { ...common, kind: 'one-process' } : { ...common, kind: 'pipeline', peers, link: 'relay', linkDelayMs: 0 };
      try {
        if (peers > 0) await prebuild(c.dir, weights, peers);
        const r = await measure(spec);
        rate.set(`${weights}/${peers}/${name}`, r.decodeTokensPerSecond);
        const where = peers === 0 ? 'one process' : `${peers} relay peers`;
        const mib = r.packed ? `${(r.packed.bytesPerLayer / 2 ** 20).toFixed(1)} MiB/layer, LM head ${(r.packed.lmHeadBytes / 2 ** 20).toFixed(1)} MiB` : '';
        const split = r.breakdownMs ? `; median ms per token: ${Object.entries(r.breakdownMs).map(([part, ms]) => `${part} ${ms.toFixed(2)}`).join(', ')}` : '';
        console.log(`${name}: ${weights}, ${where}, ${mib}: decode ${r.decodeTokensPerSecond.toFixed(2)} tokens/s (load ${r.loadAverage.map((l) => l.toFixed(1)).join(' → ')})${split}`);
      } catch (error) {
        console.log(`${name}: ${weights}, ${peers} peers: failed (${error instanceof Error ? error.message : String(error)})`);
      }
    }
    const moe = rate.get(`${weights}/${peers}/qwen3-moe`);
    const dense = rate.get(`${weights}/${peers}/qwen3 dense, same bytes`);
    if (moe !== undefined && dense !== undefined) console.log(`  MoE ÷ dense, ${weights}, ${peers === 0 ? 'one process' : `${peers} peers`}: ${(moe / dense).toFixed(2)}×`);
    if (moe !== undefined && llama !== undefined) console.log(`  meshnet ÷ llama.cpp ${GGUF_TYPE[weights]}, ${weights}, ${peers === 0 ? 'one process' : `${peers} peers`}: ${(moe / llama).toFixed(2)}× (target ≥ 0.8×)`);
  }
}
