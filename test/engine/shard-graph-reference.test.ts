/**
 * Shard graphs against the pure-TypeScript reference forward pass, for every supported
 * architecture and checkpoint dtype: logits agree within 1e-4 (fp32 activations), in
 * prefill and in the decode steps after it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers } from '../reference/forward.ts';
import { TINY_PRESETS, type TinyCheckpointOptions } from '../fixtures/checkpoints.ts';
import { fixtureModel, maxAbsDiff, pipeline, referenceWeights, stepLogits, tempDir } from './harness.ts';

const CASES: Record<string, TinyCheckpointOptions> = {
  llama: { ...TINY_PRESETS.llama, dtype: 'F32', seed: 1 },
  'llama untied': { ...TINY_PRESETS.llamaUntied, dtype: 'F32', seed: 2 },
  'llama3 rope scaling': { ...TINY_PRESETS.llama3, dtype: 'F32', seed: 3 },
  mistral: { ...TINY_PRESETS.mistral, dtype: 'F32', seed: 4 },
  'mistral, window 4 shorter than the prompt': { ...TINY_PRESETS.mistral, dtype: 'F32', seed: 9, slidingWindow: 4 },
  qwen2: { ...TINY_PRESETS.qwen2, dtype: 'F32', seed: 5 },
  qwen3: { ...TINY_PRESETS.qwen3, dtype: 'F32', seed: 6 },
  'llama F16 checkpoint': { ...TINY_PRESETS.llama, dtype: 'F16', seed: 7 },
  'qwen2 BF16 checkpoint, sharded': { ...TINY_PRESETS.qwen2, dtype: 'BF16', seed: 8, sharded: true },
};

const PROMPT = [1, 17, 42, 99, 5, 64];
const DECODE = [7, 120, 33];

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('reference');
  process.env.MESHNET_HOME = root.dir + '/home';
});
afterAll(() => root.remove());

describe('shard graph vs reference forward pass', () => {
  for (const [name, options] of Object.entries(CASES)) {
    it(name, async () => {
      const model = await fixtureModel(root.dir, name.replace(/\W+/g, '-'), options);
      const { config } = model.checkpoint;
      const weights = await referenceWeights(model.checkpoint);
      const p = await pipeline(model, [{ start: 0, end: config.numLayers }]);
      try {
        const kv = new ReferenceKvCache();
        const all = { start: 0, end: config.numLayers };
        const expectLogits = (ids: number[]) => {
          const hidden = referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv);
          return referenceHead(config, weights, hidden[hidden.length - 1]);
        };
        const prefill = await stepLogits(p, 's', PROMPT, 0);
        expect(maxAbsDiff(prefill, expectLogits(PROMPT))).toBeLessThan(1e-4);
        let position = PROMPT.length;
        for (const id of DECODE) {
          const logits = await stepLogits(p, 's', [id], position++);
          expect(maxAbsDiff(logits, expectLogits([id]))).toBeLessThan(1e-4);
        }
      } finally {
        await p.dispose();
      }
    });
  }
});
