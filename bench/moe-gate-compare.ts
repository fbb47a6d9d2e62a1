/**
 * Old vs new MoE layer graph in ONE process, runs alternated (issue 23): imports the shard
 * artifact builder from two source trees (`--base`, e.g. a `git archive` of the previous
 * commit, and this tree) and times one-token decode runs of a q4 Qwen3-MoE layers-only
 * artifact at the layer shape (hidden 1024, 64 experts × 512, top 8), both sessions
 * over the same weights bytes. Prints each median and new ÷ old.
 *   node --import tsx bench/moe-gate-compare.ts --base /tmp/base [--layers 2] [--runs 200]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as ort from 'onnxruntime-node';
import { writeTinyCheckpoint } from '../test/fixtures/checkpoints.ts';
import { tinyMoeCheckpoint } from '../test/fixtures/moe-checkpoints.ts';
import { openLocalModel } from '../src/node/local-model.ts';

const { values } = parseArgs({ options: { base: { type: 'string' }, layers: { type: 'string', default: '2' }, runs: { type: 'string', default: '200' } } });
if (!values.base) throw new Error('--base <source tree of the old graph> is required');
const layers = Number(values.layers);
const runs = Number(values.runs);
const root = await mkdtemp(path.join(tmpdir(), 'moe-cmp-'));
const dir = path.join(root, 'ckpt');
await writeTinyCheckpoint(dir, { ...tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'BF16', seed: 7, numExperts: 64, topK: 8, expertSize: 512, numLayers: layers, hiddenSize: 1024, tied: true }), dtype: 'BF16', seed: 7, numLayers: layers, hiddenSize: 1024, numHeads: 8, numKvHeads: 4, headDim: 128, vocabSize: 1024, tied: true });
const model = await openLocalModel(dir);
const { config, tensors } = model.checkpoint;

async function session(tree: string): Promise<{ s: ort.InferenceSession; feeds: Record<string, ort.Tensor> }> {
  const art = (await import(path.join(tree, 'src/core/model/shard-artifact.ts'))) as typeof import('../src/core/model/shard-artifact.ts');
  const fmt = (await import(path.join(tree, 'src/core/model/quant/weight-format.ts'))) as typeof import('../src/core/model/quant/weight-format.ts');
  const sg = (await import(path.join(tree, 'src/core/model/shard-graph.ts'))) as typeof import('../src/core/model/shard-graph.ts');
  const artifact = art.buildShardArtifact(config, tensors, 'key', { kind: 'layers', range: { start: 0, end: layers } }, 'fp32', fmt.weightSpec('fp32', { format: 'q4', blockSize: 32, accuracyLevel: 4 }));
  const weights = await art.loadShardWeights(artifact.manifest, model.checkpoint.source);
  const s = await ort.InferenceSession.create(artifact.graph, { externalData: [{ path: art.WEIGHTS_FILE, data: weights }], intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 3 });
  const H = config.hiddenSize;
  const { seqlensK, total, positionIds } = sg.sequenceInputs([0], 1);
  const feeds: Record<string, ort.Tensor> = {
    [sg.SHARD_INPUT_HIDDEN]: new ort.Tensor('float32', Float32Array.from({ length: H }, (_, i) => Math.sin(i * 0.37)), [1, 1, H]),
    [sg.SHARD_INPUT_SEQLENS_K]: new ort.Tensor('int32', seqlensK, [1]),
    [sg.SHARD_INPUT_TOTAL_LENGTH]: new ort.Tensor('int32', total, []),
    [sg.SHARD_INPUT_POSITION_IDS]: new ort.Tensor('int64', positionIds, [1, 1]),
  };
  for (let l = 0; l < layers; l++) for (const n of [sg.pastKeyName(l), sg.pastValueName(l)]) feeds[n] = new ort.Tensor('float32', new Float32Array(0), [1, config.numKvHeads, 0, config.headDim]);
  return { s, feeds };
}

const variants = { old: await session(path.resolve(values.base)), new: await session(path.resolve(import.meta.dirname, '..')) };
const outs: Record<string, Float32Array> = {};
for (const [name, v] of Object.entries(variants)) {
  const r = await v.s.run(v.feeds);
  outs[name] = r[v.s.outputNames[0]].data as Float32Array;
}
let diff = 0;
for (let i = 0; i < outs.old.length; i++) diff = Math.max(diff, Math.abs(outs.old[i] - outs.new[i]));
console.log(`largest |new − old| of output ${variants.new.s.outputNames[0]}: ${diff}`);
const times: Record<string, number[]> = { old: [], new: [] };
console.log(`load before ${(await import('node:os')).loadavg().map((l) => l.toFixed(2)).join(' ')}`);
for (let i = 0; i < runs; i++) {
  for (const [name, v] of Object.entries(variants)) {
    const t0 = performance.now();
    await v.s.run(v.feeds);
    times[name].push(performance.now() - t0);
  }
}
console.log(`load after ${(await import('node:os')).loadavg().map((l) => l.toFixed(2)).join(' ')}`);
const median = (a: number[]) => [...a].sort((p, q) => p - q)[a.length >> 1];
for (const name of ['old', 'new']) console.log(`${name}: median ${median(times[name]).toFixed(3)} ms per run of ${layers} layers (${(median(times[name]) / layers).toFixed(3)} ms/layer)`);
console.log(`new ÷ old: ${(median(times.new) / median(times.old)).toFixed(3)}`);
await rm(root, { recursive: true });
