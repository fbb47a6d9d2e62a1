import { describe, expect, it } from 'vitest';
import { applyPenalties, defaultSamplingParams } from '../../src/core/sampling/index.ts';

const off = {
  repetitionPenalty: 1,
  presencePenalty: 0,
  frequencyPenalty: 0,
};
const run = (logits: number[], prompt: number[], generated: number[], p: Partial<typeof off>) =>
  Array.from(applyPenalties(Float64Array.from(logits), { prompt, generated }, { ...off, ...p }));

describe('applyPenalties', () => {
  it('repetition: divides positive logits, multiplies negative ones, once per distinct seen id', () => {
    // ids 0 and 1 in the prompt, 1 again and 3 generated; 2 and 4 unseen.
    const out = run([2, -1, 4, 0, -Infinity], [0, 1, 1], [1, 3, 4], { repetitionPenalty: 2 });
    expect(out).toEqual([1, -2, 4, 0, -Infinity]);
  });

  it('repetition below 1 boosts seen tokens', () => {
    expect(run([3, -2], [0, 1], [], { repetitionPenalty: 0.5 })).toEqual([6, -1]);
  });

  it('presence and frequency use generated tokens only (OpenAI)', () => {
    // generated: id 1 three times, id 2 once; id 0 only in the prompt.
    const out = run([1, 1, 1, 1], [0, 0], [1, 2, 1, 1], { presencePenalty: 0.5, frequencyPenalty: 0.25 });
    expect(out).toEqual([1, 1 - 3 * 0.25 - 0.5, 1 - 0.25 - 0.5, 1]);
  });

  it('applies repetition first, then presence/frequency', () => {
    const out = run([4, -4], [], [0, 1], { repetitionPenalty: 2, presencePenalty: 1, frequencyPenalty: 0.5 });
    expect(out).toEqual([4 / 2 - 1.5, -4 * 2 - 1.5]);
  });

  it('is a no-op with default parameters and leaves scratch zeroed', () => {
    const counts = new Uint32Array(3);
    const logits = Float64Array.from([1, 2, 3]);
    applyPenalties(logits, { prompt: [0, 1], generated: [2, 2] }, defaultSamplingParams, counts);
    expect(Array.from(logits)).toEqual([1, 2, 3]);
    applyPenalties(logits, { prompt: [0, 1], generated: [2, 2] }, { repetitionPenalty: 1.5, presencePenalty: 1, frequencyPenalty: 1 }, counts);
    expect(Array.from(counts)).toEqual([0, 0, 0]);
  });

  it('refuses history ids outside the vocabulary', () => {
    expect(() => run([1, 2], [2], [], { repetitionPenalty: 2 })).toThrow(RangeError);
    expect(() => run([1, 2], [], [-1], { presencePenalty: 1 })).toThrow(RangeError);
    expect(() => run([1, 2], [0.5], [], { repetitionPenalty: 2 })).toThrow(RangeError);
  });
});
