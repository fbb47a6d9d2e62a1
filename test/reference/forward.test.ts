import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../src/core/model/types.ts';
import {
  ReferenceKvCache,
  referenceEmbed,
  referenceForward,
  referenceHead,
  referenceLayers,
  type ReferenceWeights,
} from './forward.ts';

const modelDir = path.resolve(import.meta.dirname, '../fixtures/models/stories260k');

/** From the model's README: greedy decoding from [1] with llama2.c's run.c. */
const GOLDEN = [
  461, 461, 401, 401, 401, 461, 378, 455, 473, 456, 435, 299, 362, 409, 283, 264, 283, 452, 288, 13, 431, 431, 431, 431,
  431, 431, 431, 431, 431, 431, 431, 431,
];

/**
 * Minimal safetensors reader, just enough for this F32 file (kept here on purpose: the test
 * must not depend on the checkpoint loader it helps to check).
 * Layout: u64 LE header length | JSON header | data; offsets in the header are relative to data.
 */
function loadSafetensors(file: string): ReferenceWeights {
  const bytes = readFileSync(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8')) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const dataStart = 8 + headerLength;
  const cache = new Map<string, Float32Array>();
  return {
    get(name) {
      const cached = cache.get(name);
      if (cached) return cached;
      const entry = header[name];
      if (!entry) throw new Error(`no tensor ${name} in ${file}`);
      if (entry.dtype !== 'F32') throw new Error(`tensor ${name} is ${entry.dtype}, this reader handles F32 only`);
      const [begin, end] = entry.data_offsets;
      // Copy: the data start need not be 4-byte aligned for a Float32Array view.
      const raw = bytes.subarray(dataStart + begin, dataStart + end);
      const tensor = new Float32Array(new Uint8Array(raw).buffer);
      cache.set(name, tensor);
      return tensor;
    },
  };
}

/** Built by hand from config.json so this test does not depend on the config parser. */
const config: ModelConfig = {
  architecture: 'LlamaForCausalLM',
  hiddenSize: 64,
  intermediateSize: 172,
  numLayers: 5,
  numHeads: 8,
  numKvHeads: 4,
  headDim: 8,
  vocabSize: 512,
  maxPositionEmbeddings: 512,
  rmsNormEps: 1e-5,
  rope: { theta: 10000 },
  tieWordEmbeddings: true,
  attentionBias: false,
  qkNorm: false,
  bosTokenId: 1,
  eosTokenIds: [2],
};

const weights = loadSafetensors(path.join(modelDir, 'model.safetensors'));
const allLayers = { start: 0, end: config.numLayers };

function argmax(values: Float32Array): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i] - b[i]));
  return max;
}

/** Greedy decode with the KV cache: one new position per step. */
function greedy(prompt: number[], steps: number): number[] {
  const kv = new ReferenceKvCache();
  let hidden = referenceLayers(config, weights, referenceEmbed(config, weights, prompt), allLayers, kv);
  const out: number[] = [];
  for (let step = 0; step < steps; step++) {
    const next = argmax(referenceHead(config, weights, hidden[hidden.length - 1]));
    out.push(next);
    hidden = referenceLayers(config, weights, referenceEmbed(config, weights, [next]), allLayers, kv);
  }
  return out;
}

describe('reference forward pass on stories260k', () => {
  it('greedy decoding from [1] reproduces the golden sequence', () => {
    expect(greedy([1], GOLDEN.length)).toEqual(GOLDEN);
  });

  it('incremental decoding with the KV cache equals a full recompute', () => {
    const tokens = [1, ...GOLDEN.slice(0, 11)];
    const full = referenceForward(config, weights, tokens); // [positions][vocab]
    const kv = new ReferenceKvCache();
    // Prefill the first 4 positions, then one position at a time.
    const prefill = referenceLayers(config, weights, referenceEmbed(config, weights, tokens.slice(0, 4)), allLayers, kv);
    const incremental = prefill.map((h) => referenceHead(config, weights, h));
    for (const token of tokens.slice(4)) {
      const [h] = referenceLayers(config, weights, referenceEmbed(config, weights, [token]), allLayers, kv);
      incremental.push(referenceHead(config, weights, h));
    }
    expect(kv.lengthOf(0)).toBe(tokens.length);
    expect(incremental).toHaveLength(full.length);
    for (let p = 0; p < full.length; p++) expect(maxAbsDiff(incremental[p], full[p])).toBeLessThan(1e-4);
  });

  it('layers [0, 2) then [2, 5) equal [0, 5), with and without a KV cache', () => {
    const tokens = [1, 461, 461, 401, 401, 401];
    const embedded = referenceEmbed(config, weights, tokens);
    const whole = referenceLayers(config, weights, embedded, allLayers);
    const split = referenceLayers(config, weights, referenceLayers(config, weights, embedded, { start: 0, end: 2 }), { start: 2, end: 5 });
    for (let p = 0; p < tokens.length; p++) expect(maxAbsDiff(split[p], whole[p])).toBe(0);

    // Split shards each with their own cache, decoding one more position.
    const kvA = new ReferenceKvCache();
    const kvB = new ReferenceKvCache();
    referenceLayers(config, weights, referenceLayers(config, weights, embedded.slice(0, 5), { start: 0, end: 2 }, kvA), { start: 2, end: 5 }, kvB);
    const [last] = referenceLayers(config, weights, referenceLayers(config, weights, embedded.slice(5), { start: 0, end: 2 }, kvA), { start: 2, end: 5 }, kvB);
    expect(kvA.lengthOf(1)).toBe(6);
    expect(kvB.lengthOf(2)).toBe(6);
    expect(maxAbsDiff(last, whole[5])).toBeLessThan(1e-5);
  });

  it('rejects out-of-range input', () => {
    expect(() => referenceEmbed(config, weights, [512])).toThrow(RangeError);
    expect(() => referenceLayers(config, weights, [], { start: 3, end: 6 })).toThrow(RangeError);
    expect(() => referenceLayers(config, weights, [new Float32Array(63)], { start: 0, end: 1 })).toThrow(RangeError);
  });
});

describe('reference forward pass on a synthetic Qwen-style model', () => {
  // Exercises the paths stories260k does not: q/k/v biases, q/k norm, untied LM head, a
  // sliding window, and headDim != hiddenSize / numHeads.
  const qwen: ModelConfig = {
    ...config,
    architecture: 'Qwen3ForCausalLM',
    hiddenSize: 16,
    intermediateSize: 24,
    numLayers: 3,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 6,
    vocabSize: 20,
    rope: { theta: 1_000_000 },
    tieWordEmbeddings: false,
    attentionBias: true,
    qkNorm: true,
    slidingWindow: 3,
  };
  const shapes = new Map<string, number>([
    ['model.embed_tokens.weight', 20 * 16],
    ['model.norm.weight', 16],
    ['lm_head.weight', 20 * 16],
  ]);
  for (let i = 0; i < qwen.numLayers; i++) {
    const p = `model.layers.${i}.`;
    for (const [name, n] of [
      ['input_layernorm.weight', 16],
      ['post_attention_layernorm.weight', 16],
      ['self_attn.q_proj.weight', 24 * 16],
      ['self_attn.q_proj.bias', 24],
      ['self_attn.k_proj.weight', 12 * 16],
      ['self_attn.k_proj.bias', 12],
      ['self_attn.v_proj.weight', 12 * 16],
      ['self_attn.v_proj.bias', 12],
      ['self_attn.o_proj.weight', 16 * 24],
      ['self_attn.q_norm.weight', 6],
      ['self_attn.k_norm.weight', 6],
      ['mlp.gate_proj.weight', 24 * 16],
      ['mlp.up_proj.weight', 24 * 16],
      ['mlp.down_proj.weight', 16 * 24],
    ] as const) {
      shapes.set(p + name, n);
    }
  }
  let seed = 12345;
  const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1; // fixed LCG, [-1, 1)
  const tensors = new Map([...shapes].map(([name, n]) => [name, Float32Array.from({ length: n }, () => random() * 0.5)]));
  const synthetic: ReferenceWeights = {
    get(name) {
      const t = tensors.get(name);
      if (!t) throw new Error(`no tensor ${name}`);
      return t;
    },
  };
  const tokens = [1, 5, 9, 3, 17, 0, 11];

  it('reads every tensor, and incremental decoding equals a full recompute', () => {
    const read = new Set<string>();
    const tracking: ReferenceWeights = { get: (name) => (read.add(name), synthetic.get(name)) };
    const full = referenceForward(qwen, tracking, tokens);
    expect([...read].sort()).toEqual([...shapes.keys()].sort());
    const kv = new ReferenceKvCache();
    const incremental = tokens.map((token) => {
      const [h] = referenceLayers(qwen, synthetic, referenceEmbed(qwen, synthetic, [token]), { start: 0, end: 3 }, kv);
      return referenceHead(qwen, synthetic, h);
    });
    for (let p = 0; p < tokens.length; p++) expect(maxAbsDiff(incremental[p], full[p])).toBeLessThan(1e-4);
  });

  it('the sliding window hides keys older than the window', () => {
    // One layer, window 3: position 6 attends to positions 4..6 only, so changing token 0
    // cannot reach it, while position 2 (window 0..2) and a windowless model do see it.
    const layer0 = (model: ModelConfig, ids: number[]) =>
      referenceLayers(model, synthetic, referenceEmbed(model, synthetic, ids), { start: 0, end: 1 });
    const changed = [2, ...tokens.slice(1)];
    const a = layer0(qwen, tokens);
    const b = layer0(qwen, changed);
    expect(maxAbsDiff(a[6], b[6])).toBe(0);
    const unwindowed = { ...qwen, slidingWindow: undefined };
    expect(maxAbsDiff(layer0(unwindowed, tokens)[6], layer0(unwindowed, changed)[6])).toBeGreaterThan(0);
    expect(maxAbsDiff(a[2], b[2])).toBeGreaterThan(0);
  });

  it('a wrong config fails loudly on tensor size', () => {
    expect(() => referenceForward({ ...qwen, headDim: 4 }, synthetic, [1])).toThrow(/expected/);
  });
});
