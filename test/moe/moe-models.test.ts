/**
 * Mixtral, Qwen2-MoE and Qwen3-MoE shard graphs on random checkpoints with Hugging Face's
 * config keys and tensor names, against the pure-TypeScript reference (test/reference/
 * moe-forward.ts): logits within 1e-4 in prefill and decode, greedy equal; split equals
 * whole; decode equals prefill; a batched decode step equals each session alone (entries
 * routed to different experts); an expert no token chose is never computed (NaN weights
 * there leave the logits as they were).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rangesFromSplit } from '../../src/core/mesh/split.ts';
import type { LocalModel } from '../../src/node/local-model.ts';
import { tinyMoeCheckpoint, type TinyMoeOptions } from '../fixtures/moe-checkpoints.ts';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers, type ReferenceWeights } from '../reference/forward.ts';
import { argmax, fixtureModel, maxAbsDiff, pipeline, referenceWeights, stepLogits, tempDir } from '../engine/harness.ts';
import type { ModelConfig } from '../../src/core/model/types.ts';

const CASES: Record<string, TinyMoeOptions> = {
  mixtral: { architecture: 'MixtralForCausalLM', dtype: 'F32', seed: 61 },
  'qwen2-moe (shared expert, not renormalized, mlp_only_layers)': { architecture: 'Qwen2MoeForCausalLM', dtype: 'F32', seed: 62, normTopK: false, mlpOnlyLayers: [1] },
  'qwen3-moe (decoder_sparse_step 2, top 3 of 6)': { architecture: 'Qwen3MoeForCausalLM', dtype: 'F32', seed: 63, decoderSparseStep: 2, numExperts: 6, topK: 3 },
  'qwen3-moe BF16, sharded, untied': { architecture: 'Qwen3MoeForCausalLM', dtype: 'BF16', seed: 64, sharded: true, tied: false },
};
const PROMPT = [1, 17, 42, 99, 5, 64];
const DECODE = [7, 120, 33];

let root: { dir: string; remove: () => Promise<void> };
const models = new Map<string, { model: LocalModel; weights: ReferenceWeights }>();
beforeAll(async () => {
  root = await tempDir('moe');
  process.env.MESHNET_HOME = root.dir + '/home';
  for (const [name, options] of Object.entries(CASES)) {
    const model = await fixtureModel(root.dir, name.replace(/\W+/g, '-'), tinyMoeCheckpoint(options));
    models.set(name, { model, weights: await referenceWeights(model.checkpoint) });
  }
});
afterAll(() => root.remove());

const all = (config: ModelConfig) => ({ start: 0, end: config.numLayers });

describe('MoE configs', () => {
  it('parse Hugging Face keys: experts, top k, renormalization, sparse layers, shared expert', () => {
    const config = (name: string) => models.get(name)!.model.checkpoint.config;
    expect(config('mixtral').moe).toEqual({ family: 'mixtral', numExperts: 8, topK: 2, normTopK: true, expertIntermediateSize: 48, sparseLayers: [0, 1, 2, 3] });
    expect(config('qwen2-moe (shared expert, not renormalized, mlp_only_layers)').moe).toEqual({
      family: 'qwen2-moe', numExperts: 8, topK: 2, normTopK: false, expertIntermediateSize: 48, sharedExpertIntermediateSize: 80, sparseLayers: [0, 2, 3],
    });
    expect(config('qwen3-moe (decoder_sparse_step 2, top 3 of 6)').moe?.sparseLayers).toEqual([1, 3]);
  });
});

describe('MoE shard graphs vs the reference', () => {
  for (const name of Object.keys(CASES)) {
    it(`${name}: logits within 1e-4 (prefill, decode), greedy equal`, async () => {
      const { model, weights } = models.get(name)!;
      const { config } = model.checkpoint;
      const p = await pipeline(model, [all(config)]);
      try {
        const kv = new ReferenceKvCache();
        const expected = (ids: number[]) => {
          const hidden = referenceLayers(config, weights, referenceEmbed(config, weights, ids), all(config), kv);
          return referenceHead(config, weights, hidden[hidden.length - 1]);
        };
        const prefill = await stepLogits(p, 's', PROMPT, 0);
        expect(maxAbsDiff(prefill, expected(PROMPT))).toBeLessThan(1e-4);
        let position = PROMPT.length;
        for (const id of DECODE) expect(maxAbsDiff(await stepLogits(p, 's', [id], position++), expected([id]))).toBeLessThan(1e-4);

        // Greedy: 8 tokens each way from the same prompt.
        const refKv = new ReferenceKvCache();
        const refNext = (ids: number[]) => argmax(referenceHead(config, weights, referenceLayers(config, weights, referenceEmbed(config, weights, ids), all(config), refKv).at(-1)!));
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

/** Logits after a prefill of 5 tokens and after each of 3 decode steps, over `splits`. */
async function trace(model: LocalModel, splits: number[], prompt = [1, 9, 77, 23, 54], decode = [100, 3, 61]) {
  const p = await pipeline(model, rangesFromSplit(model.checkpoint.config.numLayers, splits));
  try {
    const out = [await stepLogits(p, 'trace', prompt, 0)];
    let position = prompt.length;
    for (const id of decode) out.push(await stepLogits(p, 'trace', [id], position++));
    return out;
  } finally {
    await p.dispose();
  }
}

describe('MoE invariants', () => {
  it('split equals whole; decode equals prefill (qwen2-moe: dense and sparse layers, shared expert)', async () => {
    const { model } = models.get('qwen2-moe (shared expert, not renormalized, mlp_only_layers)')!;
    const whole = await trace(model, []);
    for (const split of [[1], [2], [1, 3]]) {
      (await trace(model, split)).forEach((logits, step) => expect(maxAbsDiff(logits, whole[step]), `split ${split} step ${step}`).toBeLessThan(1e-5));
    }
    const tokens = [1, 9, 77, 23, 54, 100, 3, 61];
    const stepwise = await trace(model, [2], tokens.slice(0, 1), tokens.slice(1));
    const p = await pipeline(model, rangesFromSplit(4, [2]));
    try {
      for (let n = 1; n <= tokens.length; n++) expect(maxAbsDiff(await stepLogits(p, `prefill-${n}`, tokens.slice(0, n), 0), stepwise[n - 1]), `n=${n}`).toBeLessThan(1e-4);
    } finally {
      await p.dispose();
    }
  });

  it('a batched decode step equals each session alone, each entry routed to its own experts', async () => {
    const { model, weights } = models.get('mixtral')!;
    const { config } = model.checkpoint;
    const p = await pipeline(model, [all(config)]);
    try {
      const { executor, kv } = p.stages[0];
      expect(executor.batch).toBeDefined();
      const prompts = [3, 7, 1, 12];
      const ids = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 1 + ((seed * 31 + i * 17) % 100));
      const alone: Float32Array[] = [];
      const steps = [];
      const routes = new Set<string>(); // each entry's chosen experts for its new token, in every layer
      const recording = { ...weights, get: weights.get, onRoute: (layer: number, experts: readonly number[]) => last.push(`${layer}:${[...experts].sort()}`) };
      let last: string[] = [];
      for (const [i, n] of prompts.entries()) {
        for (const sessionId of [`alone-${i}`, `batch-${i}`]) {
          await executor.run({ sessionId, startPosition: 0, hidden: await p.head.embed(ids(n, i)) }, kv.acquire(sessionId, executor.range));
        }
        const next = await p.head.embed([5 + 9 * i]);
        alone.push((await executor.run({ sessionId: `alone-${i}`, startPosition: n, hidden: next }, kv.find(`alone-${i}`, executor.range)!)).data as Float32Array);
        steps.push({ sessionId: `batch-${i}`, startPosition: n, hidden: next });
        const refKv = new ReferenceKvCache();
        referenceLayers(config, recording, referenceEmbed(config, weights, ids(n, i)), all(config), refKv);
        last = [];
        referenceLayers(config, recording, referenceEmbed(config, weights, [5 + 9 * i]), all(config), refKv);
        routes.add(last.join(' '));
      }
      expect(routes.size, 'the entries chose different experts').toBe(prompts.length);
      const batched = await executor.batch!.run(steps, steps.map((s) => kv.find(s.sessionId, executor.range)!));
      batched.forEach((out, i) => expect(maxAbsDiff(out.data as Float32Array, alone[i]), `session ${i}`).toBeLessThan(1e-5));
    } finally {
      await p.dispose();
    }
  });
});

describe('sparse compute', () => {
  it('an expert no token chose is never computed: NaN weights there leave prefill and decode logits unchanged', async () => {
    const options: TinyMoeOptions = { architecture: 'Qwen3MoeForCausalLM', dtype: 'F32', seed: 65, numExperts: 16, topK: 2, numLayers: 2 };
    const clean = await fixtureModel(root.dir, 'sparse-clean', tinyMoeCheckpoint(options));
    const { config } = clean.checkpoint;
    const weights = await referenceWeights(clean.checkpoint);
    const chosen = new Set<string>();
    const tokens = [1, 9, 77, 23, 54, 100, 3, 61];
    referenceLayers(config, { ...weights, get: weights.get, onRoute: (layer, experts) => experts.forEach((e) => chosen.add(`${layer}:${e}`)) }, referenceEmbed(config, weights, tokens), all(config));
    const unused = Array.from({ length: 16 }, (_, e) => e).find((e) => !chosen.has(`1:${e}`));
    expect(unused, 'some expert of layer 1 is never chosen').toBeDefined();
    const poisoned = await fixtureModel(root.dir, 'sparse-poisoned', tinyMoeCheckpoint({ ...options, poison: { layer: 1, expert: unused! } }));
    expect(Number.isNaN((await poisoned.checkpoint.readTensor(`model.layers.1.mlp.experts.${unused}.down_proj.weight`))[0])).toBe(true);
    const expected = await trace(clean, [], tokens.slice(0, 5), tokens.slice(5));
    const got = await trace(poisoned, [], tokens.slice(0, 5), tokens.slice(5));
    got.forEach((logits, step) => expect(maxAbsDiff(logits, expected[step]), `step ${step}`).toBeLessThan(1e-6));
  });
});

describe('MoE checkpoints refused by name', () => {
  it('a missing expert tensor, and more experts per token than experts', async () => {
    const { openLocalModel } = await import('../../src/node/local-model.ts');
    const { writeTinyCheckpoint } = await import('../fixtures/checkpoints.ts');
    const missing = `${root.dir}/missing-expert`;
    await writeTinyCheckpoint(missing, { ...tinyMoeCheckpoint({ architecture: 'MixtralForCausalLM', dtype: 'F32', seed: 66 }), omitTensors: ['model.layers.2.block_sparse_moe.experts.5.w2.weight'] });
    await expect(openLocalModel(missing)).rejects.toThrow(/model\.layers\.2\.block_sparse_moe\.experts\.5\.w2\.weight.*missing/);
    const tooMany = `${root.dir}/too-many`;
    const base = tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'F32', seed: 67 });
    await writeTinyCheckpoint(tooMany, { ...base, configOverrides: { ...base.configOverrides, num_experts_per_tok: 9 } });
    await expect(openLocalModel(tooMany)).rejects.toThrow(/num_experts_per_tok.*\(9\) must not exceed the number of experts \(8\)/);
  });
});

describe('onnxruntime-web (wasm) in Node', () => {
  it('runs the MoE graphs (NonZero, ScatterND, TopK) with the logits of onnxruntime-node', async () => {
    for (const name of ['qwen2-moe (shared expert, not renormalized, mlp_only_layers)']) {
      const { model } = models.get(name)!;
      const native = await trace(model, [2]);
      const p = await pipeline(model, rangesFromSplit(4, [2]), 'wasm');
      try {
        const wasm = [await stepLogits(p, 'wasm', [1, 9, 77, 23, 54], 0)];
        let position = 5;
        for (const id of [100, 3, 61]) wasm.push(await stepLogits(p, 'wasm', [id], position++));
        wasm.forEach((logits, step) => expect(maxAbsDiff(logits, native[step]), `${name} step ${step}`).toBeLessThan(1e-4));
      } finally {
        await p.dispose();
      }
    }
  });
});

describe('fp16 activations', () => {
  it('the MoE graphs in fp16 (router cast to float32 for softmax/top-k) stay within fp16 error of fp32', async () => {
    const { model } = models.get('qwen2-moe (shared expert, not renormalized, mlp_only_layers)')!;
    const whole = await trace(model, []);
    const p = await pipeline(model, [all(model.checkpoint.config)], 'cpu', 'fp16');
    try {
      const half = [await stepLogits(p, 'fp16', [1, 9, 77, 23, 54], 0)];
      let position = 5;
      for (const id of [100, 3, 61]) half.push(await stepLogits(p, 'fp16', [id], position++));
      half.forEach((logits, step) => expect(maxAbsDiff(logits, whole[step]), `step ${step}`).toBeLessThan(2e-2));
    } finally {
      await p.dispose();
    }
  });
});
