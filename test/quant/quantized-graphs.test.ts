/**
 * Quantized shard graphs (MatMulNBits layers and LM head, GatherBlockQuantized embedding)
 * against the pure-TypeScript reference forward pass over the same dequantized weights, for
 * q4 and q8 on every fixture architecture, at accuracy level 0 (exact): logits within 1e-3
 * in prefill and the decode steps after it. Block sizes vary between cases, including one
 * that the fixtures' intermediate size (96) does not divide (a padded last block).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { weightSpec, type WeightFormat } from '../../src/core/model/quant/weight-format.ts';
import { TINY_PRESETS, type TinyCheckpointOptions } from '../fixtures/checkpoints.ts';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers } from '../reference/forward.ts';
import { dequantizedReference } from '../reference/dequantized-weights.ts';
import { fixtureModel, maxAbsDiff, pipeline, stepLogits, tempDir } from '../engine/harness.ts';

const ARCHITECTURES: Record<string, TinyCheckpointOptions> = {
  llama: { ...TINY_PRESETS.llama, dtype: 'F32', seed: 31 },
  'llama untied': { ...TINY_PRESETS.llamaUntied, dtype: 'F32', seed: 32 },
  'llama3 rope scaling': { ...TINY_PRESETS.llama3, dtype: 'F32', seed: 33 },
  mistral: { ...TINY_PRESETS.mistral, dtype: 'F32', seed: 34 },
  qwen2: { ...TINY_PRESETS.qwen2, dtype: 'BF16', seed: 35 },
  qwen3: { ...TINY_PRESETS.qwen3, dtype: 'F16', seed: 36 },
};
const BLOCKS = [32, 64, 128];
const PROMPT = [1, 17, 42, 99, 5, 64];
const DECODE = [7, 120, 33];

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('quantized');
  process.env.MESHNET_HOME = root.dir + '/home';
});
afterAll(() => root.remove());

describe('quantized shard graphs vs the reference over their dequantized weights (accuracy level 0)', () => {
  let n = 0;
  for (const format of ['q4', 'q8'] as WeightFormat[]) {
    for (const [name, options] of Object.entries(ARCHITECTURES)) {
      const blockSize = BLOCKS[n++ % BLOCKS.length];
      it(`${format} block ${blockSize}: ${name}`, async () => {
        const model = await fixtureModel(root.dir, `${format}-${name.replace(/\W+/g, '-')}`, options);
        const { config } = model.checkpoint;
        const spec = weightSpec('fp32', { format, blockSize, accuracyLevel: 0 });
        const weights = await dequantizedReference(model, 'fp32', spec);
        const p = await pipeline(model, [{ start: 0, end: config.numLayers }], 'cpu', 'fp32', spec);
        try {
          const kv = new ReferenceKvCache();
          const all = { start: 0, end: config.numLayers };
          const expected = (ids: number[]) => {
            const hidden = referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv);
            return referenceHead(config, weights, hidden[hidden.length - 1]);
          };
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
