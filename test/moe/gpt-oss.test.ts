/**
 * gpt-oss shard graphs on random checkpoints with Hugging Face's keys and names — float
 * experts (F32 and BF16 exports) and MXFP4 blocks — against the pure-TypeScript reference
 * (test/reference/gpt-oss-forward.ts; MXFP4 decoded there independently, as transformers
 * does): logits within 1e-4 in prefill and decode across the sliding window, greedy equal;
 * split equals whole, decode equals prefill, batched equals alone; the MXFP4 → 8-bit block
 * rewrite is exact for every byte.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rangesFromSplit } from '../../src/core/mesh/split.ts';
import { dequantizeRows } from '../../src/core/model/quant/block-quant.ts';
import { mxfp4ToBlocks } from '../../src/core/model/moe/mxfp4.ts';
import type { Checkpoint } from '../../src/core/model/checkpoint.ts';
import type { LocalModel } from '../../src/node/local-model.ts';
import { tinyGptOssCheckpoint, type TinyGptOssOptions } from '../fixtures/gpt-oss-checkpoints.ts';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers, type ReferenceWeights } from '../reference/forward.ts';
import { decodeMxfp4 } from '../reference/gpt-oss-forward.ts';
import { argmax, fixtureModel, maxAbsDiff, pipeline, stepLogits, tempDir } from '../engine/harness.ts';

const CASES: Record<string, TinyGptOssOptions> = {
  'F32 experts': { dtype: 'F32', seed: 81 },
  'BF16 experts, tied': { dtype: 'BF16', seed: 82, tied: true },
  'MXFP4 experts': { dtype: 'BF16', seed: 83, mxfp4: true },
};
const PROMPT = [1, 17, 42, 99, 5, 64]; // 6 positions: past the window of 4
const DECODE = [7, 120, 33];

/** Float reference weights; MXFP4 experts decoded and laid out as the float export ([E, in, out]). */
async function gptOssReferenceWeights(checkpoint: Checkpoint): Promise<ReferenceWeights> {
  const tensors = new Map<string, Float32Array>();
  for (const [name, location] of checkpoint.tensors) {
    if (location.dtype !== 'U8') tensors.set(name, await checkpoint.readTensor(name));
    if (!name.endsWith('_blocks')) continue;
    const base = name.slice(0, -'_blocks'.length);
    const [E, N, G] = location.shape;
    const values = decodeMxfp4(await checkpoint.readTensorBytes(name), await checkpoint.readTensorBytes(`${base}_scales`)); // [E, N, K]
    const K = G * 32;
    const transposed = new Float32Array(values.length);
    for (let e = 0; e < E; e++) for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) transposed[(e * K + k) * N + n] = values[(e * N + n) * K + k];
    tensors.set(base, transposed);
  }
  return {
    get(name) {
      const t = tensors.get(name);
      if (!t) throw new Error(`no tensor ${name}`);
      return t;
    },
  };
}

let root: { dir: string; remove: () => Promise<void> };
const models = new Map<string, { model: LocalModel; weights: ReferenceWeights }>();
beforeAll(async () => {
  root = await tempDir('gpt-oss');
  process.env.MESHNET_HOME = root.dir + '/home';
  for (const [name, options] of Object.entries(CASES)) {
    const model = await fixtureModel(root.dir, name.replace(/\W+/g, '-'), tinyGptOssCheckpoint(options));
    models.set(name, { model, weights: await gptOssReferenceWeights(model.checkpoint) });
  }
});
afterAll(() => root.remove());

describe('MXFP4 as 8-bit blocks', () => {
  it('every byte and scale dequantizes to exactly what transformers decodes', () => {
    const blocks = Uint8Array.from({ length: 256 * 16 }, (_, i) => i % 256 ^ (i >> 8));
    const scales = Uint8Array.from({ length: 256 }, (_, b) => [1, 60, 100, 120, 127, 130, 200, 254][b % 8]);
    const expected = decodeMxfp4(blocks, scales);
    const packed = mxfp4ToBlocks(blocks, scales, 'fp32');
    const layout = { rows: 16, cols: 16 * 32, bits: 8 as const, blockSize: 32, zeroPoints: false, scaleDtype: 'fp32' as const, padded: true };
    const plain = (values: Float32Array) => Array.from(values, (v) => v + 0); // −0 (code 8) is 0
    expect(plain(dequantizeRows(packed, layout))).toEqual(plain(expected));
    // fp16 scales: exact where fp16 holds the power of two, refused where it does not.
    const fits = Uint8Array.from({ length: 256 }, (_, b) => 110 + (b % 30));
    expect(plain(dequantizeRows(mxfp4ToBlocks(blocks, fits, 'fp16'), { ...layout, scaleDtype: 'fp16' }))).toEqual(plain(decodeMxfp4(blocks, fits)));
    expect(() => mxfp4ToBlocks(blocks, scales, 'fp16')).toThrow(/not exact in fp16/);
  });
});

describe('gpt-oss config', () => {
  it('reads layer_types, sliding_window, YaRN, experts and MXFP4 from Hugging Face keys', () => {
    const config = models.get('MXFP4 experts')!.model.checkpoint.config;
    expect([config.slidingWindow, config.slidingLayers]).toEqual([4, [true, false, true, false]]);
    expect(config.moe).toMatchObject({ family: 'gpt-oss', numExperts: 8, topK: 2, expertIntermediateSize: 32, gptOss: { mxfp4: true, swigluLimit: 7, alpha: 1.702 } });
    expect(config.rope.yarn).toMatchObject({ factor: 8, betaFast: 32, betaSlow: 1, originalMaxPositionEmbeddings: 32, truncate: false });
    expect(config.rope.yarn!.attentionFactor).toBeCloseTo(0.1 * Math.log(8) + 1, 12);
    expect(models.get('F32 experts')!.model.checkpoint.config.moe?.gptOss?.mxfp4).toBe(false);
  });
});

describe('gpt-oss shard graphs vs the reference', () => {
  for (const name of Object.keys(CASES)) {
    it(`${name}: logits within 1e-4 (prefill, decode past the window), greedy equal`, async () => {
      const { model, weights } = models.get(name)!;
      const { config } = model.checkpoint;
      const all = { start: 0, end: config.numLayers };
      const p = await pipeline(model, [all]);
      try {
        const kv = new ReferenceKvCache();
        const expected = (ids: number[]) => referenceHead(config, weights, referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv).at(-1)!);
        expect(maxAbsDiff(await stepLogits(p, 's', PROMPT, 0), expected(PROMPT))).toBeLessThan(1e-4);
        let position = PROMPT.length;
        for (const id of DECODE) expect(maxAbsDiff(await stepLogits(p, 's', [id], position++), expected([id]))).toBeLessThan(1e-4);
        const refKv = new ReferenceKvCache();
        const refNext = (ids: number[]) => argmax(referenceHead(config, weights, referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, refKv).at(-1)!));
        const ours: number[] = [];
        const theirs: number[] = [];
        let next = argmax(await stepLogits(p, 'greedy', PROMPT, 0));
        let ref = refNext(PROMPT);
        for (let i = 0; i < 8; i++) {
          ours.push(next);
          theirs.push(ref);
          next = argmax(await stepLogits(p, 'greedy', [next], PROMPT.length + i));
          ref = refNext([ref]);
        }
        expect(ours).toEqual(theirs);
      } finally {
        await p.dispose();
      }
    });
  }
});

/** Logits after a prefill and each decode step, over `splits`, on `device`. */
async function trace(model: LocalModel, splits: number[], prompt: number[], decode: number[], device = 'cpu') {
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

describe('gpt-oss invariants (MXFP4)', () => {
  const tokens = [1, 9, 77, 23, 54, 100, 3, 61];
  it('split equals whole; decode equals prefill; onnxruntime-web wasm gives the same logits', async () => {
    const { model } = models.get('MXFP4 experts')!;
    const whole = await trace(model, [], tokens.slice(0, 5), tokens.slice(5));
    for (const split of [[1], [2, 3]]) (await trace(model, split, tokens.slice(0, 5), tokens.slice(5))).forEach((l, step) => expect(maxAbsDiff(l, whole[step]), `split ${split} step ${step}`).toBeLessThan(1e-5));
    const stepwise = await trace(model, [2], tokens.slice(0, 1), tokens.slice(1));
    const p = await pipeline(model, rangesFromSplit(4, [2]));
    try {
      for (let n = 1; n <= tokens.length; n++) expect(maxAbsDiff(await stepLogits(p, `prefill-${n}`, tokens.slice(0, n), 0), stepwise[n - 1]), `n=${n}`).toBeLessThan(1e-4);
    } finally {
      await p.dispose();
    }
    (await trace(model, [2], tokens.slice(0, 5), tokens.slice(5), 'wasm')).forEach((l, step) => expect(maxAbsDiff(l, whole[step]), `wasm step ${step}`).toBeLessThan(1e-4));
  });

  it('a batched decode step equals each session alone (lengths inside and past the window)', async () => {
    const { model } = models.get('MXFP4 experts')!;
    const p = await pipeline(model, [{ start: 0, end: 4 }]);
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

  it('refuses float experts in q4 by name, and a quantization it does not know', async () => {
    const { weightSpec } = await import('../../src/core/model/quant/weight-format.ts');
    const { model } = models.get('F32 experts')!;
    await expect(pipeline(model, [{ start: 0, end: 4 }], 'cpu', 'fp32', weightSpec('fp32', { format: 'q4', blockSize: 32, accuracyLevel: 0 }))).rejects.toThrow(/gpt-oss float experts .*gate_up_proj.* in q4 are not supported/);
    const { parseModelConfig } = await import('../../src/core/model/config.ts');
    const config = JSON.parse(await model.checkpoint.source.readText('config.json'));
    expect(() => parseModelConfig('config.json', { ...config, quantization_config: { quant_method: 'fp8' } })).toThrow(/quantization_config' quant_method "fp8" is not supported for gpt-oss/);
  });
});

describe('gpt-oss in fp16 activations', () => {
  it('MXFP4 experts with fp16 scales stay within fp16 error of fp32', async () => {
    const { model } = models.get('MXFP4 experts')!;
    const tokens = [1, 9, 77, 23, 54, 100, 3, 61];
    const whole = await trace(model, [], tokens.slice(0, 5), tokens.slice(5));
    const p = await pipeline(model, [{ start: 0, end: 4 }], 'cpu', 'fp16');
    try {
      const half = [await stepLogits(p, 'fp16', tokens.slice(0, 5), 0)];
      let position = 5;
      for (const id of tokens.slice(5)) half.push(await stepLogits(p, 'fp16', [id], position++));
      half.forEach((logits, step) => expect(maxAbsDiff(logits, whole[step]), `step ${step}`).toBeLessThan(2e-2));
    } finally {
      await p.dispose();
    }
  });
});
