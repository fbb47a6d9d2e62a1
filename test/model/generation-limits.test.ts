/** Context length and stop tokens, derived once from the config and tokenizer. */
import { describe, expect, it } from 'vitest';
import { completionBudget, ContextLengthError, generationLimits, MAX_ROTARY_POSITIONS, rotaryPositions } from '../../src/core/model/generation-limits.ts';

const config = { maxPositionEmbeddings: 2048, eosTokenIds: [2] };

describe('generationLimits', () => {
  it('the context is max_position_embeddings, within the rotary table; a sliding window does not cut it', () => {
    expect(generationLimits(config).contextLength).toBe(2048);
    expect(generationLimits({ ...config, slidingWindow: 16 } as typeof config).contextLength).toBe(2048);
    const long = { ...config, maxPositionEmbeddings: 131072 };
    expect(rotaryPositions(long)).toBe(MAX_ROTARY_POSITIONS);
    // A request may never ask for positions beyond the rotary table the graph was built with.
    expect(generationLimits(long).contextLength).toBe(rotaryPositions(long));
  });

  it('stop tokens are the config EOS ids and the tokenizer EOS ids, each once', () => {
    expect(generationLimits({ ...config, eosTokenIds: [2, 7] }, { specialTokens: { eosIds: [7, 9] } }).stopTokenIds).toEqual([2, 7, 9]);
    expect(generationLimits({ ...config, eosTokenIds: [] }).stopTokenIds).toEqual([]);
  });
});

describe('completionBudget', () => {
  const limits = generationLimits(config);

  it('cuts the default to the room left in the context', () => {
    expect(completionBudget(limits, 10, undefined, 512)).toBe(512);
    expect(completionBudget(limits, 2000, undefined, 512)).toBe(48);
  });

  it('keeps a requested value that fits and refuses one that does not', () => {
    expect(completionBudget(limits, 10, 100, 512)).toBe(100);
    expect(completionBudget(limits, 1948, 100, 512)).toBe(100);
    const error = (() => {
      try {
        completionBudget(limits, 2000, 100, 512);
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(ContextLengthError);
    expect(error).toMatchObject({ contextLength: 2048, promptTokens: 2000, requestedTokens: 100, code: 'context_length_exceeded' });
  });

  it('refuses a prompt that fills the context', () => {
    expect(() => completionBudget(limits, 2048, undefined, 512)).toThrow(ContextLengthError);
    expect(() => completionBudget(limits, 2048, 1, 512)).toThrow(/no room/);
  });
});
