import { describe, expect, it } from 'vitest';
import { createRng, selectCandidates, selectTopN, type FilterParams } from '../../src/core/sampling/index.ts';

/** The textbook version: full sort, then each filter in order. */
function reference(logits: number[], p: FilterParams): Map<number, number> {
  let ids = logits.map((_, i) => i).filter((i) => logits[i] !== -Infinity);
  ids.sort((a, b) => (logits[a] === logits[b] ? a - b : logits[b] - logits[a]));
  if (p.topK > 0) ids = ids.slice(0, p.topK);
  const max = logits[ids[0]];
  const w = ids.map((i) => Math.exp((logits[i] - max) / p.temperature));
  const total = w.reduce((a, b) => a + b, 0);
  const probs = w.map((x) => x / total);
  let keep = ids.length;
  let mass = 0;
  for (let k = 0; k < ids.length && p.topP < 1; k++) {
    mass += probs[k];
    if (mass >= p.topP) {
      keep = k + 1;
      break;
    }
  }
  keep = Math.min(keep, probs.filter((x) => x >= p.minP * probs[0]).length);
  const kept = probs.slice(0, keep).reduce((a, b) => a + b, 0);
  return new Map(ids.slice(0, keep).map((id, k) => [id, probs[k] / kept]));
}

function randomLogits(vocab: number, seed: number): number[] {
  const rng = createRng(seed);
  // Quantized so that ties happen; a few masked tokens.
  return Array.from({ length: vocab }, () => (rng.next() < 0.02 ? -Infinity : Math.round((rng.next() - 0.5) * 80) / 4));
}

describe('selectCandidates', () => {
  const cases: FilterParams[] = [
    { temperature: 1, topK: 0, topP: 1, minP: 0 },
    { temperature: 0.7, topK: 0, topP: 0.9, minP: 0 },
    { temperature: 1.3, topK: 0, topP: 0.5, minP: 0.01 },
    { temperature: 1, topK: 0, topP: 1, minP: 0.2 },
    { temperature: 0.9, topK: 50, topP: 0.95, minP: 0.05 },
    { temperature: 2, topK: 3000, topP: 0.99, minP: 0 },
    { temperature: 0.05, topK: 0, topP: 0.8, minP: 0 },
  ];
  it.each(cases)('equals the full-sort reference for %j', (params) => {
    for (const seed of [1, 2, 3]) {
      const logits = randomLogits(3000, seed);
      const { ids, probs, count } = selectCandidates(Float64Array.from(logits), params);
      const expected = reference(logits, params);
      expect(count).toBe(expected.size);
      let sum = 0;
      for (let k = 0; k < count; k++) {
        expect(probs[k]).toBeCloseTo(expected.get(ids[k]) ?? Number.NaN, 12);
        sum += probs[k];
      }
      expect(sum).toBeCloseTo(1, 12);
    }
  });
});

describe('selectCandidates top-p boundary ties', () => {
  it('keeps the lowest ids among tokens tied at the boundary', () => {
    const logits = Float64Array.from([1, 1, 1, 1]);
    const kept = (topP: number, topK = 0) => {
      const { ids, count } = selectCandidates(logits, { temperature: 1, topK, topP, minP: 0 });
      return Array.from(ids.subarray(0, count));
    };
    expect(kept(0.2)).toEqual([0]);
    expect(kept(0.6)).toEqual([0, 1, 2]);
    expect(kept(0.6, 3)).toEqual([0, 1]); // 1/3 each within the top-3
    expect(kept(0.7, 3)).toEqual([0, 1, 2]);
    expect(kept(1)).toEqual([0, 1, 2, 3]);
  });
});

describe('selectTopN', () => {
  it('returns the n largest, descending, ties to the lower index, skipping -Infinity', () => {
    const values = [3, -Infinity, 5, 3, 9, 5, -1];
    const out = new Int32Array(4);
    expect(selectTopN(values, 4, out)).toBe(4);
    expect(Array.from(out)).toEqual([4, 2, 5, 0]);
    expect(selectTopN([-Infinity, 1], 4, out)).toBe(1);
    expect(out[0]).toBe(1);
  });
});
