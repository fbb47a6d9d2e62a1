/**
 * What a MoE decode step runs (expert-gate.ts): each expert's nodes sit in the `then` branch
 * of an If on "some token chose it", so one token runs the chains of its k experts per sparse
 * layer and an unchosen expert costs two nodes (its flag and the If). Checked on onnxruntime's
 * own profile of a real session: the NonZero that opens each expert's chain runs k times per
 * layer whatever the expert count, and the experts' linears (MatMulNBits) run k per layer too;
 * before the If, every expert ran its chain on zero rows (E NonZero per layer).
 */
import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';
import { buildShardArtifact, loadShardWeights, WEIGHTS_FILE } from '../../src/core/model/shard-artifact.ts';
import { pastKeyName, pastValueName, sequenceInputs, SHARD_INPUT_HIDDEN, SHARD_INPUT_POSITION_IDS, SHARD_INPUT_SEQLENS_K, SHARD_INPUT_TOTAL_LENGTH } from '../../src/core/model/shard-graph.ts';
import type { LocalModel } from '../../src/node/local-model.ts';
import { tinyMoeCheckpoint } from '../fixtures/moe-checkpoints.ts';
import { fixtureModel, tempDir } from '../engine/harness.ts';

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('moe-runs');
});
afterAll(() => root.remove());

/** Op type → kernel runs in one session run of all layers of `model` on one token (q4 experts, gate and up as one MatMulNBits). */
async function kernelRuns(model: LocalModel, name: string): Promise<Map<string, number>> {
  const { config, tensors } = model.checkpoint;
  const artifact = buildShardArtifact(config, tensors, 'key', { kind: 'layers', range: { start: 0, end: config.numLayers } }, 'fp32', weightSpec('fp32', { format: 'q4', blockSize: 32, accuracyLevel: 4 }));
  const weights = await loadShardWeights(artifact.manifest, model.checkpoint.source);
  const prefix = path.join(root.dir, name);
  const session = await ort.InferenceSession.create(artifact.graph, { externalData: [{ path: WEIGHTS_FILE, data: weights }], enableProfiling: true, profileFilePrefix: prefix, logSeverityLevel: 3 });
  const H = config.hiddenSize;
  const kv = config.numKvHeads * config.headDim;
  const { seqlensK, total, positionIds } = sequenceInputs([0], 1);
  const hidden = Float32Array.from({ length: H }, (_, i) => Math.sin(i * 0.37));
  const feeds: Record<string, ort.Tensor> = {
    [SHARD_INPUT_HIDDEN]: new ort.Tensor('float32', hidden, [1, 1, H]),
    [SHARD_INPUT_SEQLENS_K]: new ort.Tensor('int32', seqlensK, [1]),
    [SHARD_INPUT_TOTAL_LENGTH]: new ort.Tensor('int32', total, []),
    [SHARD_INPUT_POSITION_IDS]: new ort.Tensor('int64', positionIds, [1, 1]),
  };
  for (let l = 0; l < config.numLayers; l++) {
    for (const n of [pastKeyName(l), pastValueName(l)]) feeds[n] = new ort.Tensor('float32', new Float32Array(0), [1, config.numKvHeads, 0, config.headDim]);
  }
  expect(kv).toBeGreaterThan(0);
  await session.run(feeds);
  session.endProfiling(); // writes `${prefix}_<time>.json`
  await session.release();
  const written = (await readdir(root.dir)).find((f) => f.startsWith(`${name}_`) && f.endsWith('.json'));
  expect(written, 'onnxruntime wrote its profile').toBeDefined();
  const file = path.join(root.dir, written!);
  const events = JSON.parse(await readFile(file, 'utf8')) as { cat: string; name: string; args?: { op_name?: string } }[];
  await rm(file);
  const runs = new Map<string, number>();
  for (const e of events) if (e.cat === 'Node' && e.name.endsWith('_kernel_time') && e.args?.op_name) runs.set(e.args.op_name, (runs.get(e.args.op_name) ?? 0) + 1);
  return runs;
}

describe('a MoE decode step runs only its chosen experts', () => {
  it('one token: k expert chains per layer (NonZero, MatMulNBits), the same with 8 and with 32 experts', async () => {
    const layers = 2;
    const topK = 2;
    const counts = [];
    for (const numExperts of [8, 32]) {
      const model = await fixtureModel(root.dir, `e${numExperts}`, tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'F32', seed: 66, numExperts, topK, numLayers: layers }));
      const runs = await kernelRuns(model, `e${numExperts}`);
      counts.push({ numExperts, nonZero: runs.get('NonZero') ?? 0, matMulNBits: runs.get('MatMulNBits') ?? 0, ifs: runs.get('If') ?? 0 });
    }
    for (const c of counts) {
      expect(c.nonZero, `${c.numExperts} experts: one NonZero per chosen expert per layer`).toBe(layers * topK);
      expect(c.ifs, `${c.numExperts} experts: one If per expert per layer`).toBe(layers * c.numExperts);
    }
    // Attention's linears are the same in both; the experts add 2 (gate+up, down) per chosen expert.
    expect(counts[1].matMulNBits).toBe(counts[0].matMulNBits);
    expect(counts[0].matMulNBits).toBeGreaterThanOrEqual(layers * topK * 2);
  });
});
