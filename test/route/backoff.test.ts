import { describe, expect, it } from 'vitest';
import { backoffDelays } from '../../src/core/route/backoff.ts';

describe('backoffDelays', () => {
  it('doubles from baseMs and stops at maxMs', () => {
    expect(backoffDelays({ baseMs: 100, maxMs: 1000, attempts: 6 })).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(backoffDelays({ baseMs: 250, maxMs: 250, attempts: 3 })).toEqual([250, 250, 250]);
    expect(backoffDelays({ baseMs: 0, maxMs: 10, attempts: 2 })).toEqual([0, 0]);
    expect(backoffDelays({ baseMs: 100, maxMs: 1000, attempts: 0 })).toEqual([]);
  });

  it('stays capped for very many attempts', () => {
    const delays = backoffDelays({ baseMs: 1, maxMs: 5000, attempts: 2000 });
    expect(delays.at(-1)).toBe(5000);
    expect(delays.every((d) => Number.isFinite(d) && d <= 5000)).toBe(true);
  });

  it('jitter shrinks each delay by up to jitter × delay, reproducibly with an injected rng', () => {
    const values = [0, 0.5, 0.999, 0.25];
    const rng = (): number => values.shift() ?? 0;
    expect(backoffDelays({ baseMs: 100, maxMs: 1000, attempts: 4, jitter: 1, rng })).toEqual([100, 100, 0, 600]);
    const sequence = (): (() => number) => {
      let i = 0;
      return () => ((i++ * 0.37) % 1);
    };
    const a = backoffDelays({ baseMs: 100, maxMs: 2000, attempts: 8, jitter: 0.5, rng: sequence() });
    expect(backoffDelays({ baseMs: 100, maxMs: 2000, attempts: 8, jitter: 0.5, rng: sequence() })).toEqual(a);
    const plain = backoffDelays({ baseMs: 100, maxMs: 2000, attempts: 8 });
    a.forEach((d, i) => {
      expect(d).toBeLessThanOrEqual(plain[i]);
      expect(d).toBeGreaterThanOrEqual(plain[i] / 2);
    });
  });

  it('with jitter off the rng is never called', () => {
    const rng = (): number => {
      throw new Error('called');
    };
    expect(backoffDelays({ baseMs: 10, maxMs: 100, attempts: 3, jitter: 0, rng })).toEqual([10, 20, 40]);
  });

  it('with default Math.random jitter stays within bounds', () => {
    for (const d of backoffDelays({ baseMs: 100, maxMs: 800, attempts: 50, jitter: 1 })) {
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThanOrEqual(800);
    }
  });

  it.each([
    [{ baseMs: -1, maxMs: 10, attempts: 1 }],
    [{ baseMs: Number.NaN, maxMs: 10, attempts: 1 }],
    [{ baseMs: 10, maxMs: 5, attempts: 1 }],
    [{ baseMs: 10, maxMs: Number.POSITIVE_INFINITY, attempts: 1 }],
    [{ baseMs: 10, maxMs: 100, attempts: -1 }],
    [{ baseMs: 10, maxMs: 100, attempts: 1.5 }],
    [{ baseMs: 10, maxMs: 100, attempts: 1, jitter: 1.5 }],
    [{ baseMs: 10, maxMs: 100, attempts: 1, jitter: -0.1 }],
  ])('throws RangeError on %o', (options) => {
    expect(() => backoffDelays(options)).toThrow(RangeError);
  });
});
