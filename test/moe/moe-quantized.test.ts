/**
 * q8/q4 experts: MoE shard graphs (experts on MatMulNBits, gate and up as one op; the router
 * and the shared expert's gate in the activation dtype) against the reference over the same
 * dequantized weights, at accuracy level 0: logits within 1e-3 in prefill and decode; a
 * batched q4 decode step (the [B, seq, H] stream) equals each session alone; and the
 * planner's bytes per layer are the largest layer's, with all its experts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { weightSpec, type WeightFormat } from '../../src/core/model/quant/weight-format.ts';
import { buildShardArtifact, partWeightBytes } from '../../src/core/model/shard-artifact.ts';
import { meshModel } from '../../src/node/mesh-model.ts';
import { tinyMoeCheckpoint, type TinyMoeOptions } from '../fixtures/moe-checkpoints.ts';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers } from '../reference/forward.ts';
import { dequantizedReference } from '../reference/dequantized-weights.ts';
import { fixtureModel, maxAbsDiff, pipeline, stepLogits, tempDir } from '../engine/harness.ts';

const CASES: Record<string, TinyMoeOptions> = {
  mixtral: { architecture: 'MixtralForCausalLM', dtype: 'F32', seed: 71 },
  'qwen2-moe': { architecture: 'Qwen2MoeForCausalLM', dtype: 'BF16', seed: 72, mlpOnlyLayers: [0] },
  'qwen3-moe': { architecture: 'Qwen3MoeForCausalLM', dtype: 'F16', seed: 73, decoderSparseStep: 2 },
};
const PROMPT = [1, 17, 42, 99, 5, 64];
const DECODE = [7, 120, 33];

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('moe-quant');
  process.env.MESHNET_HOME = root.dir + '/home';
});
afterAll(() => root.remove());

describe('quantized experts vs the reference over their dequantized weights (accuracy level 0)', () => {
  let n = 0;
  for (const format of ['q4', 'q8'] as WeightFormat[]) {
    for (const [name, options] of Object.entries(CASES)) {
      const blockSize = [32, 64][n++ % 2];
      it(`${format} block ${blockSize}: ${name}`, async () => {
        const model = await fixtureModel(root.dir, `${format}-${name}`, tinyMoeCheckpoint(options));
        const { config } = model.checkpoint;
        const spec = weightSpec('fp32', { format, blockSize, accuracyLevel: 0 });
        const weights = await dequantizedReference(model, 'fp32', spec);
        const all = { start: 0, end: config.numLayers };
        const p = await pipeline(model, [all], 'cpu', 'fp32', spec);
        try {
          const kv = new ReferenceKvCache();
          const expected = (ids: number[]) => referenceHead(config, weights, referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv).at(-1)!);
          expect(maxAbsDiff(await stepLogits(p, 's', PROMPT, 0), expected(PROMPT))).toBeLessThan(1e-3);
          let position = PROMPT.length;
          for (const id of DECODE) expect(maxAbsDiff(await stepLogits(p, 's', [id], position++), expected([id]))).toBeLessThan(1e-3);
        } finally {
          await p.dispose();
        }
      });
    }
  }
});

describe('q4 MoE: batched decode, planner bytes', () => {
  it('a batched decode step equals each session alone', async () => {
    const model = await fixtureModel(root.dir, 'batch', tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'F32', seed: 74 }));
    const spec = weightSpec('fp32', { format: 'q4', blockSize: 32, accuracyLevel: 0 });
    const p = await pipeline(model, [{ start: 0, end: model.checkpoint.config.numLayers }], 'cpu', 'fp32', spec);
    try {
      const { executor, kv } = p.stages[0];
      const prompts = [3, 7, 1, 12];
      const ids = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 1 + ((seed * 31 + i * 17) % 100));
      const alone: Float32Array[] = [];
      const steps = [];
      for (const [i, n] of prompts.entries()) {
        for (const sessionId of [`alone-${i}`, `batch-${i}`]) await executor.run({ sessionId, startPosition: 0, hidden: await p.head.embed(ids(n, i)) }, kv.acquire(sessionId, executor.range));
        const next = await p.head.embed([5 + 9 * i]);
        alone.push((await executor.run({ sessionId: `alone-${i}`, startPosition: n, hidden: next }, kv.find(`alone-${i}`, executor.range)!)).data as Float32Array);
        steps.push({ sessionId: `batch-${i}`, startPosition: n, hidden: next });
      }
      const batched = await executor.batch!.run(steps, steps.map((s) => kv.find(s.sessionId, executor.range)!));
      batched.forEach((out, i) => expect(maxAbsDiff(out.data as Float32Array, alone[i]), `session ${i}`).toBeLessThan(1e-5));
    } finally {
      await p.dispose();
    }
  });

  it('bytes per layer are the largest layer with all its experts', async () => {
    const model = await fixtureModel(root.dir, 'bytes', tinyMoeCheckpoint({ architecture: 'Qwen2MoeForCausalLM', dtype: 'F32', seed: 75, mlpOnlyLayers: [0] }));
    const { config, tensors } = model.checkpoint;
    for (const format of ['fp32', 'q8', 'q4'] as WeightFormat[]) {
      const spec = weightSpec('fp32', { format, blockSize: 32, accuracyLevel: 0 });
      const layer = (l: number) => partWeightBytes(config, tensors, { kind: 'layers', range: { start: l, end: l + 1 } }, 'fp32', spec);
      const planned = meshModel(model, 'moe', 'fp32', spec).bytesPerLayer;
      expect(planned, format).toBe(layer(1));
      expect(layer(1), `${format}: the sparse layer outweighs the dense layer 0`).toBeGreaterThan(layer(0));
      // 8 experts of 3 × 48 × 64 weights, plus the shared expert (3 × 80 × 64) and attention.
      const bytesPerWeight = format === 'fp32' ? 4 : format === 'q8' ? 1 : 0.5;
      expect(planned, format).toBeGreaterThan((8 * 3 * 48 * 64 + 3 * 80 * 64) * bytesPerWeight);
    }
    // The router and the shared expert's gate stay in the activation dtype; experts are quantized.
    const q4 = buildShardArtifact(config, tensors, 'key', { kind: 'layers', range: { start: 1, end: 2 } }, 'fp32', weightSpec('fp32', { format: 'q4', blockSize: 32, accuracyLevel: 0 }));
    const kinds = new Map(q4.manifest.segments.map((segment) => [segment.name, segment.kind]));
    expect(kinds.get('model.layers.1.mlp.gate.weight')).toBe('float');
    expect(kinds.get('model.layers.1.mlp.shared_expert_gate.weight')).toBe('float');
    expect(kinds.get('model.layers.1.mlp.experts.7.down_proj.weight')).toBe('quantize');
    expect(kinds.get('model.layers.1.mlp.shared_expert.up_proj.weight')).toBe('quantize');
  });
});
