/**
 * Where a MoE decode step's time goes (issue 23): onnxruntime-node's own profile of one-token
 * runs of a q4 Qwen3-MoE layers-only artifact at the layer shape (hidden 1024, 64
 * experts of 512, top 8): the unprofiled median first, then kernel time and runs per op type
 * (an If's time includes its branch's nodes, which are also listed under their own op types).
 * Profiling itself inflates small nodes several-fold (compare model_run with the unprofiled
 * median): read the profile for counts and big kernels, the unprofiled median for time.
 *   node --import tsx bench/moe-layer-profile.ts [--layers 2] [--runs 20]
 */
import { readdir, readFile, rm, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as ort from 'onnxruntime-node';
import { weightSpec } from '../src/core/model/quant/weight-format.ts';
import { buildShardArtifact, loadShardWeights, WEIGHTS_FILE } from '../src/core/model/shard-artifact.ts';
import { pastKeyName, pastValueName, sequenceInputs, SHARD_INPUT_HIDDEN, SHARD_INPUT_POSITION_IDS, SHARD_INPUT_SEQLENS_K, SHARD_INPUT_TOTAL_LENGTH } from '../src/core/model/shard-graph.ts';
import { writeTinyCheckpoint } from '../test/fixtures/checkpoints.ts';
import { tinyMoeCheckpoint } from '../test/fixtures/moe-checkpoints.ts';
import { openLocalModel } from '../src/node/local-model.ts';

const { values } = parseArgs({ options: { layers: { type: 'string', default: '2' }, runs: { type: 'string', default: '20' }, profile: { type: 'boolean', default: true } } });
const layers = Number(values.layers);
const runs = Number(values.runs);
const root = await mkdtemp(path.join(tmpdir(), 'moe-prof-'));
const dir = path.join(root, 'ckpt');
await writeTinyCheckpoint(dir, { ...tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'BF16', seed: 7, numExperts: 64, topK: 8, expertSize: 512, numLayers: layers, hiddenSize: 1024, tied: true }), dtype: 'BF16', seed: 7, numLayers: layers, hiddenSize: 1024, numHeads: 8, numKvHeads: 4, headDim: 128, vocabSize: 1024, tied: true });
const model = await openLocalModel(dir);
const { config, tensors } = model.checkpoint;
const artifact = buildShardArtifact(config, tensors, 'key', { kind: 'layers', range: { start: 0, end: layers } }, 'fp32', weightSpec('fp32', { format: 'q4', blockSize: 32, accuracyLevel: 4 }));
const weights = await loadShardWeights(artifact.manifest, model.checkpoint.source);
const prefix = path.join(root, 'prof');
const options = { externalData: [{ path: WEIGHTS_FILE, data: weights }], intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 3 as const };
const H = config.hiddenSize;
const { seqlensK, total, positionIds } = sequenceInputs([0], 1);
const feeds: Record<string, ort.Tensor> = {
  [SHARD_INPUT_HIDDEN]: new ort.Tensor('float32', Float32Array.from({ length: H }, (_, i) => Math.sin(i * 0.37)), [1, 1, H]),
  [SHARD_INPUT_SEQLENS_K]: new ort.Tensor('int32', seqlensK, [1]),
  [SHARD_INPUT_TOTAL_LENGTH]: new ort.Tensor('int32', total, []),
  [SHARD_INPUT_POSITION_IDS]: new ort.Tensor('int64', positionIds, [1, 1]),
};
for (let l = 0; l < layers; l++) for (const n of [pastKeyName(l), pastValueName(l)]) feeds[n] = new ort.Tensor('float32', new Float32Array(0), [1, config.numKvHeads, 0, config.headDim]);

const plain = await ort.InferenceSession.create(artifact.graph, options);
for (let i = 0; i < 5; i++) await plain.run(feeds);
const wall: number[] = [];
for (let i = 0; i < runs * 3; i++) {
  const t0 = performance.now();
  await plain.run(feeds);
  wall.push(performance.now() - t0);
}
wall.sort((a, b) => a - b);
console.log(`unprofiled: median ${wall[wall.length >> 1].toFixed(3)} ms per run of ${layers} layers (${(wall[wall.length >> 1] / layers).toFixed(3)} ms/layer)`);
await plain.release();

const session = await ort.InferenceSession.create(artifact.graph, { ...options, enableProfiling: true, profileFilePrefix: prefix });
for (let i = 0; i < runs; i++) await session.run(feeds);
session.endProfiling();
await session.release();
const file = path.join(root, (await readdir(root)).find((f) => f.startsWith('prof_') && f.endsWith('.json'))!);
const events = JSON.parse(await readFile(file, 'utf8')) as { cat: string; name: string; dur: number; args?: { op_name?: string } }[];
await rm(root, { recursive: true });
const sums = new Map<string, { us: number; n: number }>();
let all = 0;
let step = 0;
for (const e of events) {
  if (e.cat === 'Session' && e.name === 'model_run') step += e.dur;
  if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || !e.args?.op_name) continue;
  const key = e.args.op_name;
  const s = sums.get(key) ?? { us: 0, n: 0 };
  s.us += e.dur;
  s.n += 1;
  sums.set(key, s);
  if (key !== 'If') all += e.dur;
}
console.log(`profiled model_run: ${(step / runs / 1000).toFixed(3)} ms/run; kernel time without If ${(all / runs / 1000).toFixed(3)} ms/run`);
for (const [k, s] of [...sums].sort((a, b) => b[1].us - a[1].us)) console.log(`${k.padEnd(32)} ${(s.us / runs).toFixed(0).padStart(7)} µs/run  ${(s.n / runs).toFixed(0).padStart(5)} runs  ${(s.us / s.n).toFixed(1)} µs each`);
