/**
 * Numerical invariants of the shard graphs: chained shards equal the single full-range
 * shard (prefill and decode), N decode steps equal one prefill of the same N tokens, and
 * the onnxruntime-web wasm path gives the same logits as onnxruntime-node.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rangesFromSplit } from '../../src/core/mesh/split.ts';
import type { LocalModel } from '../../src/node/local-model.ts';
import { TINY_PRESETS } from '../fixtures/checkpoints.ts';
import { fixtureModel, maxAbsDiff, pipeline, stepLogits, tempDir } from './harness.ts';

const TOKENS = [1, 9, 77, 23, 54, 100, 3, 61];
let root: { dir: string; remove: () => Promise<void> };
let models: Record<string, LocalModel>;

beforeAll(async () => {
  root = await tempDir('invariants');
  process.env.MESHNET_HOME = root.dir + '/home';
  models = {
    llama: await fixtureModel(root.dir, 'llama', { ...TINY_PRESETS.llama, dtype: 'F32', seed: 11, numLayers: 5 }),
    qwen3: await fixtureModel(root.dir, 'qwen3', { ...TINY_PRESETS.qwen3, dtype: 'F32', seed: 12, numLayers: 4 }),
  };
});
afterAll(() => root.remove());

/** Logits after a prefill of `prompt` and after each following single-token decode step. */
async function trace(model: LocalModel, splits: number[], device = 'cpu', prompt = TOKENS.slice(0, 5), decode = TOKENS.slice(5)) {
  const p = await pipeline(model, rangesFromSplit(model.checkpoint.config.numLayers, splits), device);
  try {
    const out = [await stepLogits(p, 'trace', prompt, 0)];
    let position = prompt.length;
    for (const id of decode) out.push(await stepLogits(p, 'trace', [id], position++));
    return out;
  } finally {
    await p.dispose();
  }
}

describe('split equals whole', () => {
  for (const name of ['llama', 'qwen3']) {
    it(`${name}: every split point, prefill and decode`, async () => {
      const model = models[name];
      const whole = await trace(model, []);
      const layers = model.checkpoint.config.numLayers;
      const splits: number[][] = [[1], [layers - 1], [1, 2], [1, 2, 3]];
      for (let s = 2; s < layers - 1; s++) splits.push([s]);
      for (const split of splits) {
        const chained = await trace(model, split);
        chained.forEach((logits, step) => expect(maxAbsDiff(logits, whole[step]), `split ${split} step ${step}`).toBeLessThan(1e-5));
      }
    });
  }
});

describe('decode equals prefill', () => {
  it('N single-token steps give the last logits of one N-token prefill', async () => {
    for (const name of ['llama', 'qwen3']) {
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

describe('logits of several positions', () => {
  it('the head graph scores every position asked for, each as a step of its own would', async () => {
    for (const name of ['llama', 'qwen3']) {
      const model = models[name];
      const stepwise = await trace(model, [2], 'cpu', TOKENS.slice(0, 1), TOKENS.slice(1));
      const p = await pipeline(model, rangesFromSplit(model.checkpoint.config.numLayers, [2]));
      try {
        let hidden = await p.head.embed(TOKENS);
        for (const stage of p.stages) hidden = await stage.executor.run({ sessionId: 'rows', startPosition: 0, hidden }, stage.kv.acquire('rows', stage.executor.range));
        const vocab = model.checkpoint.config.vocabSize;
        const rows = [0, 3, 4, 7];
        const logits = await p.head.logits(hidden, rows);
        expect(logits.length).toBe(rows.length * vocab);
        rows.forEach((row, i) => expect(maxAbsDiff(logits.subarray(i * vocab, (i + 1) * vocab), stepwise[row]), `${name} row ${row}`).toBeLessThan(1e-4));
        // The default is the last position.
        expect(maxAbsDiff(await p.head.logits(hidden), stepwise[7])).toBeLessThan(1e-4);
        await expect(p.head.logits(hidden, [8])).rejects.toThrow(RangeError);
        await expect(p.head.logits(hidden, [])).rejects.toThrow(RangeError);
      } finally {
        await p.dispose();
      }
    }
  });
});

describe('onnxruntime-web (wasm) in Node', () => {
  it('gives the same logits as onnxruntime-node on the same shard graphs', async () => {
    for (const name of ['llama', 'qwen3']) {
      const native = await trace(models[name], [2]);
      const wasm = await trace(models[name], [2], 'wasm');
      wasm.forEach((logits, step) => expect(maxAbsDiff(logits, native[step]), `${name} step ${step}`).toBeLessThan(1e-4));
    }
  });
});
