/**
 * Batched decode with compact weights: q4 layers keep the [B, seq, H] stream (MatMulNBits,
 * #12), so one onnxruntime run of several sessions, each at its own length, must give each
 * session what its own run gives — on a llama layout and on qwen3's (q/k norms reshape per
 * head inside that stream). And (float weights, both KV modes): a session released while its
 * step runs — a client that went away — leaves the run answering and the others committed.
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
        expect(executor.batch).toBeDefined();
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
        const batched = await executor.batch!.run(steps, steps.map((s) => kv.find(s.sessionId, executor.range)!));
        batched.forEach((out, i) => expect(maxAbsDiff(out.data as Float32Array, alone[i]), `session ${i}`).toBeLessThan(1e-5));
      } finally {
        await p.dispose();
      }
    });
  }
});

describe('a session released while its step runs', () => {
  for (const kvMode of ['pool', 'replace'] as const) {
    it(`${kvMode}: the run still answers, writes nothing for it, and the batch's other session commits`, async () => {
      const model = models.llama;
      const { loadLocalPipeline } = await import('../../src/node/local-model.ts');
      const p = await loadLocalPipeline(model, { ranges: [{ start: 0, end: model.checkpoint.config.numLayers }], device: 'cpu', dtype: 'fp32', threads: 1, kvMode });
      try {
        const { executor, kv } = p.stages[0];
        for (const id of ['kept', 'gone']) await executor.run({ sessionId: id, startPosition: 0, hidden: await p.head.embed([1, 2, 3]) }, kv.acquire(id, executor.range));
        const next = await p.head.embed([4]);
        const steps = [
          { sessionId: 'kept', startPosition: 3, hidden: next },
          { sessionId: 'gone', startPosition: 3, hidden: next },
        ];
        const states = steps.map((s) => kv.find(s.sessionId, executor.range)!);
        const running = kvMode === 'pool' ? executor.batch!.run(steps, states) : executor.run(steps[1], states[1]).then((out) => [out]);
        kv.release('gone'); // the client went away while the run was in flight
        const outs = await running;
        expect(outs.every((o) => o.data.length === o.tokens * o.hiddenSize)).toBe(true);
        expect(states[1].isDisposed).toBe(true);
        expect([states[1].length, states[1].bytes], 'nothing written for the released session').toEqual([0, 0]);
        if (kvMode === 'pool') expect(states[0].length).toBe(4);
      } finally {
        await p.dispose();
      }
    });
  }
});
