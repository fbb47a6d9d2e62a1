/**
 * Gemma's numerical invariants: chained shards equal the whole model (prefill and decode past
 * the window), N decode steps equal one N-token prefill, onnxruntime-web's wasm gives the CPU
 * provider's logits, and q8 / q4 graphs equal the reference over their dequantized weights.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rangesFromSplit } from '../../src/core/mesh/split.ts';
import { weightSpec, type WeightSpec } from '../../src/core/model/quant/weight-format.ts';
import type { LocalModel } from '../../src/node/local-model.ts';
import { buildGemmaCheckpointFiles } from '../fixtures/gemma-checkpoints.ts';
import { fixtureModelFromFiles, maxAbsDiff, pipeline, stepLogits, tempDir } from '../engine/harness.ts';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers } from '../reference/forward.ts';
import { dequantizedReference } from '../reference/dequantized-weights.ts';

const TOKENS = [1, 9, 77, 23, 54, 100, 3, 61, 12, 90];
let root: { dir: string; remove: () => Promise<void> };
let models: Record<'gemma2' | 'gemma3', LocalModel>;

beforeAll(async () => {
  root = await tempDir('gemma-invariants');
  process.env.MESHNET_HOME = root.dir + '/home';
  models = {
    gemma2: await fixtureModelFromFiles(root.dir, 'gemma2', buildGemmaCheckpointFiles({ version: 2, dtype: 'F32', tied: true, seed: 111, slidingWindow: 3, numLayers: 4 })),
    gemma3: await fixtureModelFromFiles(root.dir, 'gemma3', buildGemmaCheckpointFiles({ version: 3, dtype: 'F32', tied: false, seed: 112, slidingWindow: 4, slidingWindowPattern: 3, numLayers: 5 })),
  };
});
afterAll(() => root.remove());

/** Logits after a prefill of `prompt` and after each following single-token decode step. */
async function trace(model: LocalModel, splits: number[], device = 'cpu', prompt = TOKENS.slice(0, 5), decode = TOKENS.slice(5), spec?: WeightSpec) {
  const p = await pipeline(model, rangesFromSplit(model.checkpoint.config.numLayers, splits), device, 'fp32', spec);
  try {
    const out = [await stepLogits(p, 'trace', prompt, 0)];
    let position = prompt.length;
    for (const id of decode) out.push(await stepLogits(p, 'trace', [id], position++));
    return out;
  } finally {
    await p.dispose();
  }
}

describe('Gemma: split equals whole', () => {
  for (const name of ['gemma2', 'gemma3'] as const) {
    it(`${name}: every single split point and a three-way split`, async () => {
      const model = models[name];
      const whole = await trace(model, []);
      const layers = model.checkpoint.config.numLayers;
      const splits: number[][] = [[1, 3]];
      for (let s = 1; s < layers; s++) splits.push([s]);
      for (const split of splits) {
        const chained = await trace(model, split);
        chained.forEach((logits, step) => expect(maxAbsDiff(logits, whole[step]), `split ${split} step ${step}`).toBeLessThan(1e-5));
      }
    });
  }
});

describe('Gemma: decode equals prefill', () => {
  it('N single-token steps give the last logits of one N-token prefill, across the window', async () => {
    for (const name of ['gemma2', 'gemma3'] as const) {
      const model = models[name];
      const stepwise = await trace(model, [2], 'cpu', TOKENS.slice(0, 1), TOKENS.slice(1));
      const p = await pipeline(model, rangesFromSplit(model.checkpoint.config.numLayers, [2]));
      try {
        for (let n = 1; n <= TOKENS.length; n++) {
          const prefill = await stepLogits(p, `prefill-${n}`, TOKENS.slice(0, n), 0);
          expect(maxAbsDiff(prefill, stepwise[n - 1]), `${name} n=${n}`).toBeLessThan(1e-4);
        }
      } finally {
        await p.dispose();
      }
    }
  });
});

describe('Gemma on onnxruntime-web (wasm) in Node', () => {
  it('gives the CPU provider logits (softcap and window in GroupQueryAttention)', async () => {
    for (const name of ['gemma2', 'gemma3'] as const) {
      const native = await trace(models[name], [2]);
      const wasm = await trace(models[name], [2], 'wasm');
      wasm.forEach((logits, step) => expect(maxAbsDiff(logits, native[step]), `${name} step ${step}`).toBeLessThan(1e-4));
    }
  });
});

describe('Gemma with compact weights', () => {
  for (const format of ['q8', 'q4'] as const) {
    it(`${format}: equals the reference over the dequantized weights`, async () => {
      for (const name of ['gemma2', 'gemma3'] as const) {
        const model = models[name];
        const { config } = model.checkpoint;
        const spec = weightSpec('fp32', { format, blockSize: 32, accuracyLevel: 0 });
        const weights = await dequantizedReference(model, 'fp32', spec);
        const all = { start: 0, end: config.numLayers };
        const kv = new ReferenceKvCache();
        const expected = (ids: number[]) => {
          const hidden = referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv);
          return referenceHead(config, weights, hidden[hidden.length - 1]);
        };
        const got = await trace(model, [], 'cpu', TOKENS.slice(0, 5), TOKENS.slice(5), spec);
        expect(maxAbsDiff(got[0], expected(TOKENS.slice(0, 5))), `${name} prefill`).toBeLessThan(1e-3);
        for (let i = 5; i < TOKENS.length; i++) expect(maxAbsDiff(got[i - 4], expected([TOKENS[i]])), `${name} step ${i}`).toBeLessThan(1e-3);
      }
    });
  }
});
