/**
 * Numerical invariants with compact weights: chained q4 shards equal the single full-range
 * shard, decode steps equal one prefill (both accuracy levels), onnxruntime-web's wasm gives
 * the CPU provider's level-0 logits (wasm has no int8 path: level 4 runs exact there), and
 * fp16 weights (cast to fp32 activations, or with fp16 activations) equal the reference over
 * their fp16-rounded values.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { weightSpec, type WeightSpec } from '../../src/core/model/quant/weight-format.ts';
import { rangesFromSplit } from '../../src/core/mesh/split.ts';
import type { LocalModel } from '../../src/node/local-model.ts';
import { TINY_PRESETS } from '../fixtures/checkpoints.ts';
import { fixtureModel, maxAbsDiff, pipeline, stepLogits, tempDir } from '../engine/harness.ts';
import { referenceForward } from '../reference/forward.ts';
import { dequantizedReference } from '../reference/dequantized-weights.ts';

const TOKENS = [1, 9, 77, 23, 54, 100, 3, 61];
const q4 = (accuracyLevel: 0 | 4) => weightSpec('fp32', { format: 'q4', blockSize: 32, accuracyLevel });

let root: { dir: string; remove: () => Promise<void> };
let llama: LocalModel;
let qwen2: LocalModel;
beforeAll(async () => {
  root = await tempDir('quant-invariants');
  process.env.MESHNET_HOME = root.dir + '/home';
  llama = await fixtureModel(root.dir, 'llama', { ...TINY_PRESETS.llama, dtype: 'F32', seed: 41, numLayers: 5, intermediateSize: 80 });
  qwen2 = await fixtureModel(root.dir, 'qwen2', { ...TINY_PRESETS.qwen2, dtype: 'F32', seed: 42 });
});
afterAll(() => root.remove());

/** Logits after a prefill of the first 5 tokens and after each following decode step. */
async function trace(model: LocalModel, splits: number[], spec: WeightSpec, device = 'cpu') {
  const p = await pipeline(model, rangesFromSplit(model.checkpoint.config.numLayers, splits), device, 'fp32', spec);
  try {
    const out = [await stepLogits(p, 'trace', TOKENS.slice(0, 5), 0)];
    for (let i = 5; i < TOKENS.length; i++) out.push(await stepLogits(p, 'trace', [TOKENS[i]], i));
    return out;
  } finally {
    await p.dispose();
  }
}

describe('q4: split equals whole', () => {
  for (const level of [0, 4] as const) {
    it(`accuracy level ${level}, every single split point and one three-way split`, async () => {
      const whole = await trace(llama, [], q4(level));
      for (const split of [[1], [2], [3], [4], [1, 3]]) {
        const chained = await trace(llama, split, q4(level));
        chained.forEach((logits, step) => expect(maxAbsDiff(logits, whole[step]), `split ${split} step ${step}`).toBeLessThan(1e-5));
      }
    });
  }
});

describe('q4: decode equals prefill', () => {
  // Level 4 quantizes activations per row and block, so a one-row step and a many-row
  // prefill see the same int8 values: both levels agree to float rounding.
  for (const [level, tolerance] of [
    [0, 1e-4],
    [4, 1e-4],
  ] as const) {
    it(`accuracy level ${level}: N single-token steps give the last logits of one N-token prefill`, async () => {
      const p = await pipeline(llama, [{ start: 0, end: 5 }], 'cpu', 'fp32', q4(level));
      try {
        const stepwise: Float32Array[] = [];
        for (let i = 0; i < TOKENS.length; i++) stepwise.push(await stepLogits(p, 'steps', [TOKENS[i]], i));
        for (let n = 1; n <= TOKENS.length; n++) {
          const prefill = await stepLogits(p, `prefill-${n}`, TOKENS.slice(0, n), 0);
          expect(maxAbsDiff(prefill, stepwise[n - 1]), `n=${n}`).toBeLessThan(tolerance);
        }
      } finally {
        await p.dispose();
      }
    });
  }
});

describe('onnxruntime-web (wasm) in Node with compact weights', () => {
  for (const format of ['q4', 'q8'] as const) {
    it(`${format}: wasm equals the CPU provider's exact level`, async () => {
      const native = await trace(qwen2, [2], weightSpec('fp32', { format, accuracyLevel: 0 }));
      for (const level of [0, 4] as const) {
        const wasm = await trace(qwen2, [2], weightSpec('fp32', { format, accuracyLevel: level }), 'wasm');
        wasm.forEach((logits, step) => expect(maxAbsDiff(logits, native[step]), `level ${level} step ${step}`).toBeLessThan(1e-4));
      }
    });
  }
});

describe('fp16 weights', () => {
  for (const [label, dtype, tolerance] of [
    ['cast to fp32 activations', 'fp32', 1e-4],
    ['with fp16 activations', 'fp16', 5e-3],
  ] as const) {
    it(`${label}: equal the reference over the fp16-rounded weights`, async () => {
      const spec = weightSpec(dtype, { format: 'fp16' });
      const weights = await dequantizedReference(qwen2, dtype, spec);
      const p = await pipeline(qwen2, [{ start: 0, end: 4 }], 'cpu', dtype, spec);
      try {
        const expected = referenceForward(qwen2.checkpoint.config, weights, TOKENS).at(-1)!;
        expect(maxAbsDiff(await stepLogits(p, 'fp16', TOKENS, 0), expected)).toBeLessThan(tolerance);
      } finally {
        await p.dispose();
      }
    });
  }
});
