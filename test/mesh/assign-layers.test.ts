import { describe, expect, it } from 'vitest';
import { assignLayers, layerCounts } from '../../src/core/mesh/assign-layers.ts';
import { PlanError } from '../../src/core/mesh/plan-error.ts';
import type { LayerRange } from '../../src/core/model/types.ts';

const sizes = (ranges: readonly LayerRange[]): number[] => ranges.map((r) => r.end - r.start);

/** Small deterministic generator (mulberry32) so the property test is reproducible. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('assignLayers', () => {
  it('splits in proportion, ties to the earlier participant', () => {
    expect(assignLayers(5, [1, 1])).toEqual([{ start: 0, end: 3 }, { start: 3, end: 5 }]);
    expect(sizes(assignLayers(8, [3, 1]))).toEqual([6, 2]);
    expect(sizes(assignLayers(8, [1, 3]))).toEqual([2, 6]);
    expect(sizes(assignLayers(10, [9, 1]))).toEqual([9, 1]);
    expect(sizes(assignLayers(7, [1, 1, 1]))).toEqual([3, 2, 2]);
    expect(sizes(assignLayers(32, [24, 8, 8]))).toEqual([19, 7, 6]); // 19.2, 6.4, 6.4: the spare layer to the earlier .4
    expect(sizes(assignLayers(5, [0.5, 0.25, 0.25]))).toEqual([3, 1, 1]);
    expect(sizes(assignLayers(1, [42]))).toEqual([1]);
  });

  it('gives at least one layer to a tiny weight and re-shares the rest', () => {
    expect(sizes(assignLayers(10, [1000, 1]))).toEqual([9, 1]);
    expect(sizes(assignLayers(4, [1000, 1, 1, 1]))).toEqual([1, 1, 1, 1]);
    expect(sizes(assignLayers(6, [100, 1, 1, 50]))).toEqual([3, 1, 1, 1]); // 100:50 over 4 → 2.67, 1.33
  });

  it('covers [0, n) exactly once, contiguously, ≥ 1 each, within ceil(share) for integer weights', () => {
    const rng = mulberry32(7);
    for (let trial = 0; trial < 2000; trial++) {
      const numLayers = 1 + Math.floor(rng() * 80);
      const count = 1 + Math.floor(rng() * Math.min(numLayers, 12));
      const integer = trial % 2 === 0;
      const weights = Array.from({ length: count }, () => (integer ? 1 + Math.floor(rng() * 40) : 1e-3 + rng() * 1e6));
      const ranges = assignLayers(numLayers, weights);
      expect(ranges).toHaveLength(count);
      let next = 0;
      for (const r of ranges) {
        expect(r.start).toBe(next);
        expect(r.end).toBeGreaterThan(r.start);
        next = r.end;
      }
      expect(next).toBe(numLayers);
      if (integer) {
        const total = weights.reduce((a, b) => a + b, 0);
        // Capacity-style weights with total ≥ layers: nobody exceeds its weight.
        if (total >= numLayers) ranges.forEach((r, i) => expect(r.end - r.start).toBeLessThanOrEqual(weights[i]));
      }
      expect(layerCounts(numLayers, weights)).toEqual(sizes(ranges));
    }
  });

  it('is deterministic', () => {
    expect(assignLayers(37, [3, 5, 7, 11])).toEqual(assignLayers(37, [3, 5, 7, 11]));
  });

  it.each([
    ['no participants', 4, []],
    ['more participants than layers', 2, [1, 1, 1]],
    ['a zero weight', 4, [1, 0]],
    ['a negative weight', 4, [1, -1]],
    ['a NaN weight', 4, [Number.NaN]],
    ['an infinite weight', 4, [Number.POSITIVE_INFINITY, 1]],
    ['a zero layer count', 0, [1]],
    ['a fractional layer count', 2.5, [1]],
  ] as const)('throws PlanError on %s', (_name, numLayers, weights) => {
    expect(() => assignLayers(numLayers, weights)).toThrow(PlanError);
    try {
      assignLayers(numLayers, weights);
    } catch (error) {
      expect((error as PlanError).code).toBe('invalid_input');
    }
  });
});
