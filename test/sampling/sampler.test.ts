import { describe, expect, it } from 'vitest';
import { Sampler, createRng, validateSamplingParams, type SamplingParams } from '../../src/core/sampling/index.ts';

const none = { prompt: [], generated: [] } as const;
const make = (p: Partial<SamplingParams>, vocab: number) => new Sampler(validateSamplingParams(p), vocab);

function softmax(xs: number[]): number[] {
  const m = Math.max(...xs);
  const e = xs.map((x) => Math.exp(x - m));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / z);
}

/** Sample counts per token id over n draws. */
function histogram(sampler: Sampler, logits: Float32Array, n: number): number[] {
  const counts = new Array(logits.length).fill(0);
  for (let i = 0; i < n; i++) counts[sampler.sample(logits, none).tokenId]++;
  return counts;
}

function chiSquare(counts: number[], probs: number[]): number {
  const n = counts.reduce((a, b) => a + b, 0);
  return probs.reduce((acc, p, i) => (p > 0 ? acc + (counts[i] - n * p) ** 2 / (n * p) : acc), 0);
}

function randomLogits(vocab: number, seed: number, scale = 4): Float32Array {
  const rng = createRng(seed);
  return Float32Array.from({ length: vocab }, () => (rng.next() - 0.5) * 2 * scale);
}

const LOGITS = Float32Array.from([1, 2, 0.5, -1, 1.5]);
// χ² critical value for 4 degrees of freedom at p = 0.001 is 18.47; seeds are fixed, so no flakes.
const CHI2_DF4 = 18.47;

describe('Sampler', () => {
  it('greedy picks the argmax, lowest id on ties, without touching the input', () => {
    const logits = Float32Array.from([0.1, 3, -2, 3, 1]);
    const copy = logits.slice();
    const s = make({ temperature: 0 }, 5);
    expect(s.sample(logits, none).tokenId).toBe(1);
    expect(s.sample(LOGITS, none).tokenId).toBe(1);
    expect(logits).toEqual(copy);
  });

  it('same seed gives the same sequence; different seeds differ', () => {
    const logits = randomLogits(50, 1, 1);
    const run = (seed: number) => {
      const s = make({ seed, topP: 0.95 }, 50);
      return Array.from({ length: 200 }, () => s.sample(logits, none).tokenId);
    };
    expect(run(7)).toEqual(run(7));
    expect(run(7)).not.toEqual(run(8));
  });

  it('temperature sampling matches softmax(logits / T) empirically', () => {
    for (const temperature of [1, 0.7, 2]) {
      const counts = histogram(make({ seed: 3, temperature }, 5), LOGITS, 20_000);
      const expected = softmax(Array.from(LOGITS, (l) => l / temperature));
      expect(chiSquare(counts, expected)).toBeLessThan(CHI2_DF4);
    }
  });

  it('top-k restricts the support to the k best and renormalizes', () => {
    const counts = histogram(make({ seed: 4, topK: 2 }, 5), LOGITS, 20_000);
    expect(counts.filter((c) => c > 0).length).toBe(2);
    const p = softmax([2, 1.5]);
    expect(chiSquare(counts, [0, p[0], 0, 0, p[1]])).toBeLessThan(10.83); // df 1
  });

  it('top-p keeps the smallest nucleus reaching p (crossing token included)', () => {
    const logits = Float32Array.from([0.5, 0.3, 0.15, 0.05].map(Math.log));
    const support = (topP: number) =>
      histogram(make({ seed: 5, topP }, 4), logits, 5000).flatMap((c, i) => (c > 0 ? [i] : []));
    expect(support(0.4)).toEqual([0]);
    expect(support(0.75)).toEqual([0, 1]);
    expect(support(0.9)).toEqual([0, 1, 2]);
    expect(support(1)).toEqual([0, 1, 2, 3]);
    const counts = histogram(make({ seed: 6, topP: 0.75 }, 4), logits, 20_000);
    expect(chiSquare(counts, [0.625, 0.375, 0, 0])).toBeLessThan(10.83);
  });

  it('min-p drops tokens below minP × the top probability', () => {
    const logits = Float32Array.from([0.5, 0.3, 0.15, 0.05].map(Math.log));
    const counts = histogram(make({ seed: 8, minP: 0.25 }, 4), logits, 20_000); // cut at p < 0.125
    expect(counts[3]).toBe(0);
    expect(chiSquare(counts, [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0])).toBeLessThan(13.82); // df 2
  });

  it('penalties steer the choice (greedy flips away from a repeated token)', () => {
    const logits = Float32Array.from([2, 1.5, 0]);
    const s = make({ temperature: 0, repetitionPenalty: 2 }, 3);
    expect(s.sample(logits, { prompt: [], generated: [] }).tokenId).toBe(0);
    expect(s.sample(logits, { prompt: [0], generated: [] }).tokenId).toBe(1);
    const f = make({ temperature: 0, frequencyPenalty: 0.3 }, 3);
    expect(f.sample(logits, { prompt: [0, 0], generated: [0] }).tokenId).toBe(0);
    expect(f.sample(logits, { prompt: [], generated: [0, 0] }).tokenId).toBe(1);
  });

  it('logprobs are log-softmax of penalized logits, temperature not applied', () => {
    const s = make({ seed: 9, temperature: 0.5, logprobs: true, topLogprobs: 5, presencePenalty: 1 }, 5);
    const history = { prompt: [4], generated: [1] };
    const expected = softmax([1, 1, 0.5, -1, 1.5]).map(Math.log); // id 1: 2 - 1
    for (let i = 0; i < 50; i++) {
      const t = s.sample(LOGITS, history);
      expect(t.logprob).toBeCloseTo(expected[t.tokenId], 12);
      expect(t.topLogprobs.map((x) => x.tokenId)).toEqual([4, 0, 1, 2, 3]); // 0 before 1 on the tie
      t.topLogprobs.forEach((x) => expect(x.logprob).toBeCloseTo(expected[x.tokenId], 12));
      expect(t.topLogprobs.reduce((a, x) => a + Math.exp(x.logprob), 0)).toBeCloseTo(1, 12);
    }
  });

  it('reports topLogprobs only when asked, capped by the unmasked tokens', () => {
    expect(make({ seed: 1 }, 5).sample(LOGITS, none).topLogprobs).toEqual([]);
    const masked = Float32Array.from([0, -Infinity, 1, -Infinity, -Infinity]);
    const t = make({ seed: 1, logprobs: true, topLogprobs: 4 }, 5).sample(masked, none);
    expect(t.topLogprobs.map((x) => x.tokenId)).toEqual([2, 0]);
    expect([0, 2]).toContain(t.tokenId);
  });

  it('refuses malformed logits and history', () => {
    const s = make({ seed: 1 }, 3);
    expect(() => s.sample(Float32Array.from([1, 2]), none)).toThrow(RangeError);
    expect(() => s.sample(Float32Array.from([1, Number.NaN, 2]), none)).toThrow(RangeError);
    expect(() => s.sample(Float32Array.from([1, Infinity, 2]), none)).toThrow(RangeError);
    expect(() => s.sample(new Float32Array(3).fill(-Infinity), none)).toThrow(RangeError);
    expect(() => make({ repetitionPenalty: 1.2 }, 3).sample(LOGITS.subarray(0, 3), { prompt: [3], generated: [] })).toThrow(RangeError);
    expect(() => new Sampler(validateSamplingParams({}), 0)).toThrow(RangeError);
  });

  it('handles a 150k vocabulary with top-k / top-p deterministically and quickly', () => {
    const vocab = 151_936;
    const logits = randomLogits(vocab, 11, 8);
    const params = { seed: 12, topK: 40, topP: 0.9, temperature: 0.8, logprobs: true, topLogprobs: 5 };
    const a = make(params, vocab);
    const b = make(params, vocab);
    const start = performance.now();
    const tokens = Array.from({ length: 20 }, () => a.sample(logits, { prompt: [1, 2, 3], generated: [] }).tokenId);
    const perToken = (performance.now() - start) / 20;
    expect(Array.from({ length: 20 }, () => b.sample(logits, { prompt: [1, 2, 3], generated: [] }).tokenId)).toEqual(tokens);
    const top40 = Array.from(logits.keys()).sort((x, y) => logits[y] - logits[x]).slice(0, 40);
    for (const t of tokens) expect(top40).toContain(t);
    expect(perToken).toBeLessThan(100); // generous: a regression guard against full sorts per token
  });
});

describe('Sampler without logprobs (no pass over the vocabulary for a normalizer)', () => {
  it('greedy gives the same token with and without logprobs and penalties off; logprob is NaN when not asked for', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const logits = randomLogits(1000, seed);
      const plain = make({ temperature: 0 }, 1000).sample(logits, none);
      const asked = make({ temperature: 0, logprobs: true }, 1000).sample(logits, none);
      expect(plain.tokenId).toBe(asked.tokenId);
      expect(plain.logprob).toBeNaN();
      expect(plain.topLogprobs).toEqual([]);
      expect(Number.isFinite(asked.logprob)).toBe(true);
    }
  });

  it('the one-pass greedy path still refuses NaN and +Infinity logits and an all -Infinity vector', () => {
    const s = make({ temperature: 0 }, 3);
    expect(() => s.sample(Float32Array.from([0, Number.NaN, 1]), none)).toThrow(/logit 1 is NaN/);
    expect(() => s.sample(Float32Array.from([0, Infinity, 1]), none)).toThrow(/logit 1 is Infinity/);
    expect(() => s.sample(Float32Array.from([-Infinity, -Infinity, -Infinity]), none)).toThrow(/every logit is -Infinity/);
  });

  it('sampled draws do not depend on whether logprobs are asked for', () => {
    const logits = randomLogits(500, 7);
    const a = make({ seed: 3, temperature: 0.9, topP: 0.95 }, 500);
    const b = make({ seed: 3, temperature: 0.9, topP: 0.95, logprobs: true }, 500);
    for (let i = 0; i < 50; i++) expect(a.sample(logits, none).tokenId).toBe(b.sample(logits, none).tokenId);
  });
});
