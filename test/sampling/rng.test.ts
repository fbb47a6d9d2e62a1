import { describe, expect, it } from 'vitest';
import { createRng, restoreRng } from '../../src/core/sampling/index.ts';

const take = (next: () => number, n: number): number[] => Array.from({ length: n }, next);

describe('rng', () => {
  it('matches the xoshiro128** reference outputs for state [1, 2, 3, 4]', () => {
    const rng = restoreRng([1, 2, 3, 4]);
    expect(take(() => rng.nextUint32(), 6)).toEqual([11520, 0, 5927040, 70819200, 2031721883, 1637235492]);
  });

  it('gives the same sequence for the same seed and different ones for different seeds', () => {
    const r1 = createRng(42);
    const r2 = createRng(42);
    const s1 = take(() => r1.next(), 100);
    expect(take(() => r2.next(), 100)).toEqual(s1);
    for (const other of [43, 0, -1, 2 ** 40, -(2 ** 40)]) {
      const r = createRng(other);
      expect(take(() => r.next(), 100)).not.toEqual(s1);
    }
  });

  it('is pinned by a golden sequence (regression guard for cross-runtime determinism)', () => {
    const rng = createRng(1234);
    const golden = take(() => rng.nextUint32(), 4);
    const again = createRng(1234);
    expect(take(() => again.nextUint32(), 4)).toEqual(golden);
    expect(golden).toMatchInlineSnapshot(`
      [
        1616533482,
        1592904518,
        1920881427,
        1142913895,
      ]
    `);
  });

  it('stays in [0, 1) and is roughly uniform', () => {
    const rng = createRng(7);
    const buckets = new Array(10).fill(0);
    let outside = 0;
    for (let i = 0; i < 100_000; i++) {
      const x = rng.next();
      if (!(x >= 0 && x < 1)) outside++;
      buckets[Math.floor(x * 10)]++;
    }
    expect(outside).toBe(0);
    for (const b of buckets) expect(Math.abs(b - 10_000)).toBeLessThan(500);
  });

  it('resumes from a state snapshot', () => {
    const rng = createRng(99);
    take(() => rng.next(), 17);
    const resumed = restoreRng(rng.state());
    expect(take(() => resumed.next(), 50)).toEqual(take(() => rng.next(), 50));
  });

  it('refuses bad seeds and states', () => {
    expect(() => createRng(1.5)).toThrow(RangeError);
    expect(() => createRng(Number.NaN)).toThrow(RangeError);
    expect(() => createRng(2 ** 60)).toThrow(RangeError);
    expect(() => restoreRng([0, 0, 0, 0])).toThrow(RangeError);
    expect(() => restoreRng([1, 2, 3, 2 ** 32])).toThrow(RangeError);
  });
});
