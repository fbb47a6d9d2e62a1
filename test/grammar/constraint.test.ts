import { describe, expect, it } from 'vitest';
import { applyTokenMask, ConstraintDeadEndError, maskAllows, maskAllowsAny, Sampler, validateSamplingParams } from '../../src/core/sampling/index.ts';

function maskOf(vocab: number, allowed: number[]): Int32Array {
  const mask = new Int32Array(Math.ceil(vocab / 32));
  for (const id of allowed) mask[id >> 5] |= 1 << (id & 31);
  return mask;
}

describe('token masks', () => {
  it('applyTokenMask bans exactly the tokens whose bit is clear, across whole and mixed words', () => {
    const vocab = 100;
    const allowed = [0, 31, 32, 33, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 93, 99];
    const mask = maskOf(vocab, allowed);
    const logits = applyTokenMask(new Float64Array(vocab).fill(1), mask);
    for (let i = 0; i < vocab; i++) expect(logits[i] === 1, `id ${i}`).toBe(allowed.includes(i));
    for (let i = 0; i < vocab; i++) expect(maskAllows(mask, i)).toBe(allowed.includes(i));
  });

  it('refuses a mask too short for the vocabulary', () => {
    expect(() => applyTokenMask(new Float64Array(65), new Int32Array(2))).toThrow(RangeError);
  });

  it('the sampler draws only allowed tokens, greedy and random, and logprobs renormalize over them', () => {
    const vocab = 64;
    const logits = new Float32Array(vocab).map((_, i) => (i === 5 ? 10 : i % 7)); // 5 is the unconstrained argmax
    const mask = maskOf(vocab, [40, 41, 50]);
    const greedy = new Sampler(validateSamplingParams({ temperature: 0 }), vocab);
    const pick = greedy.sample(logits, { prompt: [], generated: [] }, mask);
    expect([40, 41, 50]).toContain(pick.tokenId);
    expect(pick.tokenId).toBe(41); // 41 % 7 = 6 is the largest allowed logit
    const random = new Sampler(validateSamplingParams({ temperature: 1.5, seed: 3, logprobs: true, topLogprobs: 5 }), vocab);
    for (let n = 0; n < 200; n++) {
      const t = random.sample(logits, { prompt: [], generated: [] }, mask);
      expect([40, 41, 50]).toContain(t.tokenId);
      expect(t.topLogprobs.map((x) => x.tokenId).every((id) => [40, 41, 50].includes(id))).toBe(true);
      const total = t.topLogprobs.reduce((sum, x) => sum + Math.exp(x.logprob), 0);
      expect(total).toBeCloseTo(1, 10);
    }
  });

  it('a mask that allows no token of the vocabulary is a dead end, not a draw', () => {
    expect(maskAllowsAny(maskOf(64, []), 64)).toBe(false);
    expect(maskAllowsAny(maskOf(64, [63]), 64)).toBe(true);
    expect(maskAllowsAny(maskOf(64, [40]), 40)).toBe(false); // ids past the vocabulary do not count
    expect(maskAllowsAny(maskOf(64, [39]), 40)).toBe(true);
    const sampler = new Sampler(validateSamplingParams({ temperature: 0 }), 64);
    expect(() => sampler.sample(new Float32Array(64), { prompt: [], generated: [] }, maskOf(64, []))).toThrow(ConstraintDeadEndError);
  });

  it('without a mask nothing changes', () => {
    const vocab = 16;
    const logits = new Float32Array(vocab).map((_, i) => i);
    const a = new Sampler(validateSamplingParams({ temperature: 0 }), vocab).sample(logits, { prompt: [], generated: [] });
    expect(a.tokenId).toBe(15);
  });
});
