/**
 * The rejection rule on fixed distributions: over many seeded trials, a token drafted from q
 * and verified against target logits comes out distributed as the sampler's own distribution
 * p (the one `sample` draws from, after temperature and filters), whatever q is; the
 * acceptance rate is Σ min(p, q). Tolerance: every token's frequency within 5 standard errors
 * of p (σ = √(p(1 − p)/N), N = 100,000 trials: at most 0.0079), the total variation distance
 * under 0.01.
 */
import { describe, expect, it } from 'vitest';
import { createRng, Sampler, selectCandidates, validateSamplingParams, type DraftToken, type SamplingParams } from '../../src/core/sampling/index.ts';

const TRIALS = 100_000;

/** Draws an index from `probs` with `r` uniform in [0, 1). */
function drawFrom(probs: readonly number[], r: number): number {
  let c = 0;
  for (let i = 0; i < probs.length; i++) {
    c += probs[i];
    if (r < c) return i;
  }
  return probs.length - 1;
}

/** The distribution `sample` draws from for these logits and params (as plain numbers over the vocabulary). */
function targetOf(logits: Float32Array, params: SamplingParams): number[] {
  const set = selectCandidates(Float64Array.from(logits), params);
  const p = new Array<number>(logits.length).fill(0);
  for (let k = 0; k < set.count; k++) p[set.ids[k]] = set.probs[k];
  return p;
}

function run(logits: Float32Array, params: Partial<SamplingParams>, draft: (r: () => number) => DraftToken) {
  const full = validateSamplingParams({ maxTokens: 1, seed: 7, ...params });
  const sampler = new Sampler(full, logits.length);
  const drafter = createRng(99);
  const counts = new Array<number>(logits.length).fill(0);
  let accepted = 0;
  for (let t = 0; t < TRIALS; t++) {
    const result = sampler.verify(logits, { prompt: [], generated: [] }, draft(() => drafter.next()));
    counts[result.tokenId]++;
    if (result.accepted) accepted++;
  }
  return { freq: counts.map((c) => c / TRIALS), acceptance: accepted / TRIALS, target: targetOf(logits, full) };
}

function expectDistribution(freq: number[], p: number[]): void {
  let tv = 0;
  for (let i = 0; i < p.length; i++) {
    const sigma = Math.sqrt((p[i] * (1 - p[i])) / TRIALS);
    expect(Math.abs(freq[i] - p[i]), `token ${i}: ${freq[i]} vs ${p[i]}`).toBeLessThanOrEqual(5 * sigma + 1e-12);
    tv += Math.abs(freq[i] - p[i]) / 2;
  }
  expect(tv).toBeLessThan(0.01);
}

const P = [0.05, 0.3, 0.1, 0.25, 0.2, 0.1];
const LOGITS = Float32Array.from(P, (p) => Math.log(p));

describe('speculative sampling keeps the distribution', () => {
  it('a draft from a different distribution q: accepted tokens and resamples together follow p', () => {
    const q = [0.4, 0.1, 0.2, 0.05, 0.05, 0.2];
    const draftQ = { ids: [0, 1, 2, 3, 4, 5], probs: q };
    const { freq, acceptance, target } = run(LOGITS, { temperature: 1 }, (r) => ({ tokenId: drawFrom(q, r()), q: draftQ }));
    expectDistribution(freq, target);
    const expected = P.reduce((sum, p, i) => sum + Math.min(p, q[i]), 0); // Σ min(p, q) = 0.55
    expect(Math.abs(acceptance - expected)).toBeLessThan(5 * Math.sqrt((expected * (1 - expected)) / TRIALS));
  });

  it('a point-mass draft (prompt lookup, a greedy draft model) is kept with probability p(d)', () => {
    const { freq, acceptance, target } = run(LOGITS, { temperature: 1 }, () => ({ tokenId: 3 }));
    expectDistribution(freq, target);
    expect(Math.abs(acceptance - P[3])).toBeLessThan(5 * Math.sqrt((P[3] * (1 - P[3])) / TRIALS));
  });

  it('with temperature, top-k and top-p, p is the filtered distribution; q reaching outside it is always rejected there', () => {
    const params = { temperature: 0.7, topK: 4, topP: 0.9 };
    const uniform = { ids: [0, 1, 2, 3, 4, 5], probs: P.map(() => 1 / 6) };
    const { freq, target } = run(LOGITS, params, (r) => ({ tokenId: Math.floor(r() * 6), q: uniform }));
    expect(target.filter((p) => p > 0)).toHaveLength(3); // top-k 4, then top-p 0.9 cuts one more
    expectDistribution(freq, target);
    expect(freq[0]).toBe(0);
  });

  it('the same seeds give the same tokens', () => {
    const once = () => {
      const sampler = new Sampler(validateSamplingParams({ maxTokens: 1, seed: 5, temperature: 1 }), 6);
      return Array.from({ length: 50 }, (_, i) => sampler.verify(LOGITS, { prompt: [], generated: [] }, { tokenId: i % 6 }).tokenId);
    };
    expect(once()).toEqual(once());
  });

  it('greedy: the argmax, accepted exactly when it is the draft, and no RNG draw', () => {
    const sampler = new Sampler(validateSamplingParams({ maxTokens: 1, temperature: 0, seed: 1 }), 6);
    const state = sampler.rngState();
    expect(sampler.verify(LOGITS, { prompt: [], generated: [] }, { tokenId: 1 })).toMatchObject({ tokenId: 1, accepted: true });
    expect(sampler.verify(LOGITS, { prompt: [], generated: [] }, { tokenId: 3 })).toMatchObject({ tokenId: 1, accepted: false });
    const logprobs = new Sampler(validateSamplingParams({ maxTokens: 1, temperature: 0, logprobs: true }), 6);
    const checked = logprobs.verify(LOGITS, { prompt: [], generated: [] }, { tokenId: 1 });
    expect(checked).toMatchObject({ tokenId: 1, accepted: true });
    expect(checked.logprob).toBeCloseTo(Math.log(0.3), 5);
    expect(sampler.rngState()).toEqual(state);
  });

  it('refuses a draft its own q gives no chance, and ids outside the vocabulary', () => {
    const sampler = new Sampler(validateSamplingParams({ maxTokens: 1, temperature: 1, seed: 1 }), 6);
    expect(() => sampler.verify(LOGITS, { prompt: [], generated: [] }, { tokenId: 2, q: { ids: [1], probs: [1] } })).toThrow(RangeError);
    expect(() => sampler.verify(LOGITS, { prompt: [], generated: [] }, { tokenId: 6 })).toThrow(RangeError);
  });
});

describe('verifying under a grammar mask', () => {
  const maskOf = (allowed: number[]) => {
    const mask = new Int32Array(1);
    for (const id of allowed) mask[0] |= 1 << id;
    return mask;
  };

  it('greedy: the argmax among the allowed tokens; a draft the mask forbids is never kept', () => {
    const sampler = new Sampler(validateSamplingParams({ maxTokens: 1, temperature: 0 }), 6);
    const mask = maskOf([2, 3, 5]); // the unmasked argmax 1 is forbidden; 3 (p 0.25) is the best allowed
    expect(sampler.verify(LOGITS, { prompt: [], generated: [] }, { tokenId: 1 }, mask)).toMatchObject({ tokenId: 3, accepted: false });
    expect(sampler.verify(LOGITS, { prompt: [], generated: [] }, { tokenId: 3 }, mask)).toMatchObject({ tokenId: 3, accepted: true });
  });

  it('sampled: the tokens follow p restricted to the mask and renormalized, a forbidden draft is always replaced', () => {
    const allowed = [0, 2, 3, 4];
    const mask = maskOf(allowed);
    const full = validateSamplingParams({ maxTokens: 1, seed: 11, temperature: 1 });
    const sampler = new Sampler(full, 6);
    const masked = Float32Array.from(LOGITS, (l, i) => (allowed.includes(i) ? l : -Infinity));
    const target = targetOf(masked, full);
    const drafter = createRng(3);
    const counts = new Array<number>(6).fill(0);
    let keptForbidden = 0;
    for (let t = 0; t < TRIALS; t++) {
      const draft = Math.floor(drafter.next() * 6); // a point mass on any token, allowed or not
      const result = sampler.verify(LOGITS, { prompt: [], generated: [] }, { tokenId: draft }, mask);
      counts[result.tokenId]++;
      if (result.accepted && !allowed.includes(draft)) keptForbidden++;
    }
    expect(keptForbidden).toBe(0);
    expectDistribution(counts.map((c) => c / TRIALS), target);
    expect(counts[1] + counts[5]).toBe(0);
  });
});
