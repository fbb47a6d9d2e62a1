/**
 * Phi-3 shard graphs against the pure-TypeScript reference (from modeling_phi3.py): fused
 * qkv_proj / gate_up_proj kept fused, partial rotary, longrope short and long factors with the
 * attention factor, a sliding window shorter than the prompt. Logits within 1e-4 in prefill and
 * decode, greedy equal, split = whole, decode = prefill, q4 = reference over dequantized weights.
 *
 * longrope: the factors are chosen per step by the sequence length after the step (Hugging
 * Face's rule, `seq_len > original_max_position_embeddings`); keys already cached keep the
 * factors they were rotated with (Hugging Face instead drops its cache and recomputes).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rangesFromSplit } from '../../src/core/mesh/split.ts';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers } from '../reference/forward.ts';
import { dequantizedReference } from '../reference/dequantized-weights.ts';
import { buildPhi3CheckpointFiles, type Phi3CheckpointOptions } from '../fixtures/phi3-checkpoints.ts';
import { argmax, fixtureModelFromFiles, maxAbsDiff, pipeline, referenceWeights, stepLogits, tempDir } from '../engine/harness.ts';

const CASES: Record<string, Phi3CheckpointOptions> = {
  'phi-3-mini shaped, untied, window 4': { dtype: 'F32', tied: false, seed: 201, slidingWindow: 4 },
  'phi-4-mini shaped: tied, partial rotary 0.75, longrope crossing its original length of 8': { dtype: 'F32', tied: true, seed: 202, partialRotaryFactor: 0.75, longrope: { originalMax: 8 } },
  'phi-3.5-mini shaped BF16 sharded, longrope': { dtype: 'BF16', tied: false, seed: 203, sharded: true, longrope: { originalMax: 6 } },
};
const PROMPT = [1, 17, 42, 99, 5];
const DECODE = [7, 120, 33, 8, 60, 11];

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('phi3');
  process.env.MESHNET_HOME = root.dir + '/home';
});
afterAll(() => root.remove());

const open = (name: string, options: Phi3CheckpointOptions) => fixtureModelFromFiles(root.dir, name.replace(/\W+/g, '-'), buildPhi3CheckpointFiles(options));

describe('Phi-3 shard graphs vs the reference forward pass', () => {
  for (const [name, options] of Object.entries(CASES)) {
    it(name, async () => {
      const model = await open(name, options);
      const { config } = model.checkpoint;
      expect(config.fusedProjections).toBe(true);
      const weights = await referenceWeights(model.checkpoint);
      const all = { start: 0, end: config.numLayers };
      const p = await pipeline(model, [all]);
      try {
        const kv = new ReferenceKvCache();
        const expectLogits = (ids: number[]) => {
          const hidden = referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv);
          return referenceHead(config, weights, hidden[hidden.length - 1]);
        };
        expect(maxAbsDiff(await stepLogits(p, 's', PROMPT, 0), expectLogits(PROMPT))).toBeLessThan(1e-4);
        let position = PROMPT.length;
        for (const id of DECODE) expect(maxAbsDiff(await stepLogits(p, 's', [id], position++), expectLogits([id])), `position ${position - 1}`).toBeLessThan(1e-4);
        // A fresh prefill longer than the original context uses the long factors throughout, as Hugging Face does.
        const long = [...PROMPT, ...DECODE];
        const fresh = new ReferenceKvCache();
        const hidden = referenceLayers(config, weights, referenceEmbed(config, weights, long), all, fresh);
        expect(maxAbsDiff(await stepLogits(p, 'fresh', long, 0), referenceHead(config, weights, hidden.at(-1)!))).toBeLessThan(1e-4);
        // Greedy ids equal.
        const refKv = new ReferenceKvCache();
        let ids = PROMPT;
        let at = 0;
        const fromReference: number[] = [];
        const fromGraph: number[] = [];
        for (let step = 0; step < 6; step++) {
          const h = referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, refKv);
          const next = argmax(referenceHead(config, weights, h.at(-1)!));
          fromReference.push(next);
          fromGraph.push(argmax(await stepLogits(p, 'greedy', ids, at)));
          at += ids.length;
          ids = [next];
        }
        expect(fromGraph).toEqual(fromReference);
      } finally {
        await p.dispose();
      }
    });
  }
});

describe('Phi-3 invariants', () => {
  const options = CASES['phi-4-mini shaped: tied, partial rotary 0.75, longrope crossing its original length of 8'];
  const tokens = [...PROMPT, ...DECODE];
  async function trace(splits: number[], device = 'cpu') {
    const model = await open('invariants', options);
    const p = await pipeline(model, rangesFromSplit(model.checkpoint.config.numLayers, splits), device);
    try {
      const out = [await stepLogits(p, 't', tokens.slice(0, 3), 0)];
      for (let i = 3; i < tokens.length; i++) out.push(await stepLogits(p, 't', [tokens[i]], i));
      return out;
    } finally {
      await p.dispose();
    }
  }

  it('split equals whole, and wasm equals the CPU provider', async () => {
    const whole = await trace([]);
    for (const split of [[1], [2], [1, 2]]) (await trace(split)).forEach((l, step) => expect(maxAbsDiff(l, whole[step]), `split ${split} step ${step}`).toBeLessThan(1e-5));
    (await trace([1], 'wasm')).forEach((l, step) => expect(maxAbsDiff(l, whole[step]), `wasm step ${step}`).toBeLessThan(1e-4));
  });

  it('decode equals prefill while the sequence stays within the original context', async () => {
    const model = await open('invariants', options);
    const p = await pipeline(model, [{ start: 0, end: model.checkpoint.config.numLayers }]);
    try {
      const stepwise: Float32Array[] = [];
      for (let i = 0; i < 8; i++) stepwise.push(await stepLogits(p, 'steps', [tokens[i]], i));
      for (let n = 1; n <= 8; n++) expect(maxAbsDiff(await stepLogits(p, `prefill-${n}`, tokens.slice(0, n), 0), stepwise[n - 1]), `n=${n}`).toBeLessThan(1e-4);
    } finally {
      await p.dispose();
    }
  });

  it('q4 equals the reference over the dequantized weights', async () => {
    const model = await open('q4', { ...options, hiddenSize: 64, intermediateSize: 64 });
    const { config } = model.checkpoint;
    const spec = weightSpec('fp32', { format: 'q4', blockSize: 32, accuracyLevel: 0 });
    const weights = await dequantizedReference(model, 'fp32', spec);
    const p = await pipeline(model, [{ start: 0, end: config.numLayers }], 'cpu', 'fp32', spec);
    try {
      const kv = new ReferenceKvCache();
      const all = { start: 0, end: config.numLayers };
      const expected = (ids: number[]) => referenceHead(config, weights, referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv).at(-1)!);
      expect(maxAbsDiff(await stepLogits(p, 'q', PROMPT, 0), expected(PROMPT))).toBeLessThan(1e-3);
      let position = PROMPT.length;
      for (const id of DECODE) expect(maxAbsDiff(await stepLogits(p, 'q', [id], position++), expected([id]))).toBeLessThan(1e-3);
    } finally {
      await p.dispose();
    }
  });
});
