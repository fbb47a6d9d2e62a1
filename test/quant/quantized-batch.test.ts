/**
 * Batched decode with compact weights: q4 layers keep the [B, seq, H] stream (MatMulNBits,
 * #12), so one onnxruntime run of several sessions, each at its own length, must give each
 * session what its own run gives — on a llama layout and on qwen3's (q/k norms reshape per
 * head inside that stream).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';
import type { LocalModel } from '../../src/node/local-model.ts';
import { TINY_PRESETS } from '../fixtures/checkpoints.ts';
import { fixtureModel, maxAbsDiff, pipeline, tempDir } from '../engine/harness.ts';

const Q4 = weightSpec('fp32', { format: 'q4', blockSize: 32, accuracyLevel: 0 });
/** Prompt lengths of the batched sessions: each decodes its next token at its own position. */
const PROMPTS = [3, 7, 1, 12];

let root: { dir: string; remove: () => Promise<void> };
const models: Record<string, LocalModel> = {};
beforeAll(async () => {
  root = await tempDir('quant-batch');
  process.env.MESHNET_HOME = root.dir + '/home';
  models.llama = await fixtureModel(root.dir, 'llama', { ...TINY_PRESETS.llama, dtype: 'F32', seed: 51, numLayers: 3, intermediateSize: 80 });
  models.qwen3 = await fixtureModel(root.dir, 'qwen3', { ...TINY_PRESETS.qwen3, dtype: 'F32', seed: 52 });
});
afterAll(() => root.remove());

describe('q4: a batched decode step equals each session alone', () => {
  for (const name of ['llama', 'qwen3']) {
    it(`${name}: ${PROMPTS.length} sessions at lengths ${PROMPTS.join(', ')}`, async () => {
      const model = models[name];
      const p = await pipeline(model, [{ start: 0, end: model.checkpoint.config.numLayers }], 'cpu', 'fp32', Q4);
      try {
        const { executor, kv } = p.stages[0];
        expect(executor.runBatch).toBeDefined();
        const ids = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 1 + ((seed * 31 + i * 17) % 100));
        const alone: Float32Array[] = [];
        const steps = [];
        for (const [i, n] of PROMPTS.entries()) {
          for (const sessionId of [`alone-${i}`, `batch-${i}`]) {
            await executor.run({ sessionId, startPosition: 0, hidden: await p.head.embed(ids(n, i)) }, kv.acquire(sessionId, executor.range));
          }
          const next = await p.head.embed([5 + i]);
          alone.push((await executor.run({ sessionId: `alone-${i}`, startPosition: n, hidden: next }, kv.find(`alone-${i}`, executor.range)!)).data as Float32Array);
          steps.push({ sessionId: `batch-${i}`, startPosition: n, hidden: next });
        }
        const batched = await executor.runBatch!(steps, steps.map((s) => kv.find(s.sessionId, executor.range)!));
        batched.forEach((out, i) => expect(maxAbsDiff(out.data as Float32Array, alone[i]), `session ${i}`).toBeLessThan(1e-5));
      } finally {
        await p.dispose();
      }
    });
  }
});
