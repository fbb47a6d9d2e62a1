import { describe, expect, it } from 'vitest';
import {
  SamplingParamError,
  defaultSamplingParams,
  validateSamplingParams,
  type SamplingParams,
} from '../../src/core/sampling/index.ts';

function refusedField(input: Record<string, unknown>): string {
  try {
    validateSamplingParams(input as Partial<SamplingParams>);
  } catch (error) {
    expect(error).toBeInstanceOf(SamplingParamError);
    const e = error as SamplingParamError;
    expect(e.code).toBe('invalid_sampling_param');
    expect(e.message).toContain(e.field);
    expect(e.reason.length).toBeGreaterThan(0);
    return e.field;
  }
  throw new Error(`accepted ${JSON.stringify(input)}`);
}

describe('validateSamplingParams', () => {
  it('fills defaults and accepts valid values', () => {
    expect(validateSamplingParams({})).toEqual(defaultSamplingParams);
    const p = validateSamplingParams({
      temperature: 0, topK: 40, topP: 0.9, minP: 0.05, repetitionPenalty: 1.1,
      presencePenalty: -2, frequencyPenalty: 2, seed: -5, maxTokens: 1,
      stopTokenIds: [2, 0], logprobs: true, topLogprobs: 20,
    });
    expect(p.seed).toBe(-5);
    expect(p.topLogprobs).toBe(20);
    expect(Object.isFrozen(p) && Object.isFrozen(p.stopTokenIds)).toBe(true);
    expect(validateSamplingParams(p)).toEqual(p);
    expect('seed' in validateSamplingParams({ seed: undefined })).toBe(false);
  });

  it.each<[Record<string, unknown>, string]>([
    [{ temperature: -0.1 }, 'temperature'],
    [{ temperature: Number.NaN }, 'temperature'],
    [{ temperature: Infinity }, 'temperature'],
    [{ temperature: '1' }, 'temperature'],
    [{ topK: -1 }, 'topK'],
    [{ topK: 1.5 }, 'topK'],
    [{ topP: 0 }, 'topP'],
    [{ topP: 1.01 }, 'topP'],
    [{ minP: -0.1 }, 'minP'],
    [{ minP: 1.5 }, 'minP'],
    [{ repetitionPenalty: 0 }, 'repetitionPenalty'],
    [{ repetitionPenalty: -1 }, 'repetitionPenalty'],
    [{ presencePenalty: 2.5 }, 'presencePenalty'],
    [{ frequencyPenalty: -3 }, 'frequencyPenalty'],
    [{ seed: 0.5 }, 'seed'],
    [{ seed: 2 ** 60 }, 'seed'],
    [{ maxTokens: 0 }, 'maxTokens'],
    [{ maxTokens: 10.5 }, 'maxTokens'],
    [{ stopTokenIds: 3 }, 'stopTokenIds'],
    [{ stopTokenIds: [1, -2] }, 'stopTokenIds[1]'],
    [{ logprobs: 'yes' }, 'logprobs'],
    [{ logprobs: true, topLogprobs: 21 }, 'topLogprobs'],
    [{ logprobs: true, topLogprobs: -1 }, 'topLogprobs'],
    [{ topLogprobs: 3 }, 'topLogprobs'],
    [{ top_k: 3 }, 'top_k'],
  ])('refuses %j naming %s', (input, field) => {
    expect(refusedField(input)).toBe(field);
  });
});
