import { describe, expect, it } from 'vitest';
import {
  SSE_DONE,
  chatCompletion,
  chatLogprobs,
  completionLogprobs,
  newResponseId,
  sseData,
  textCompletion,
  toOpenAIUsage,
  unixSeconds,
  type ChosenToken,
  type GenerationResult,
  type ResponseMeta,
} from '../../src/node/openai/responses.ts';
import { expectSpec } from '../openapi/spec-fetch.ts';

const meta: ResponseMeta = { id: 'chatcmpl-abc', created: 1700000000, model: 'stories260k', systemFingerprint: 'fp_meshnet' };
/** Token names like the stories260k stand-in vocabulary; id 7 is a two-byte character. */
const tokenText = (id: number) => (id === 7 ? 'é' : `t${id}`);

const tokens: ChosenToken[] = [
  { tokenId: 3, text: 't3', logprob: -0.5, topLogprobs: [{ tokenId: 3, logprob: -0.5 }, { tokenId: 7, logprob: -1.25 }] },
  { tokenId: 7, text: 'é', logprob: -Infinity, topLogprobs: [{ tokenId: 4, logprob: -0.1 }, { tokenId: 5, logprob: -2 }] },
];
const result: GenerationResult = { text: 't3é', finishReason: 'length', usage: { promptTokens: 5, completionTokens: 2 }, tokens };

describe('ids, time, usage, SSE', () => {
  it('makes OpenAI-style ids', () => {
    expect(newResponseId('chat', () => '0123-4567')).toBe('chatcmpl-01234567');
    expect(newResponseId('completion', () => 'ab-cd')).toBe('cmpl-abcd');
    expect(newResponseId('chat')).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
  });

  it('gives unix seconds', () => {
    expect(unixSeconds(1700000000999)).toBe(1700000000);
  });

  it('maps usage', () => {
    expect(toOpenAIUsage({ promptTokens: 5, completionTokens: 2 })).toStrictEqual({ prompt_tokens: 5, completion_tokens: 2, total_tokens: 7, prompt_tokens_details: { cached_tokens: 0 } });
    expect(toOpenAIUsage({ promptTokens: 5, completionTokens: 2, cachedTokens: 3 }).prompt_tokens_details).toStrictEqual({ cached_tokens: 3 });
  });

  it('frames SSE events', () => {
    expect(sseData({ a: 1 })).toBe('data: {"a":1}\n\n');
    expect(SSE_DONE).toBe('data: [DONE]\n\n');
  });
});

describe('chat.completion', () => {
  it('has exactly the OpenAI shape', () => {
    const body = chatCompletion(meta, result);
    expect(body).toStrictEqual({
      id: 'chatcmpl-abc',
      object: 'chat.completion',
      created: 1700000000,
      model: 'stories260k',
      choices: [{ index: 0, message: { role: 'assistant', content: 't3é', refusal: null }, logprobs: null, finish_reason: 'length' }],
      usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7, prompt_tokens_details: { cached_tokens: 0 } },
      system_fingerprint: 'fp_meshnet',
    });
    expectSpec('CreateChatCompletionResponse', body);
  });

  it('reports logprobs with token text, UTF-8 bytes and alternatives; -Infinity as -9999', () => {
    const body = chatCompletion(meta, result, tokenText);
    expect(body.choices[0].logprobs).toStrictEqual({
      content: [
        {
          token: 't3',
          logprob: -0.5,
          bytes: [116, 51],
          top_logprobs: [
            { token: 't3', logprob: -0.5, bytes: [116, 51] },
            { token: 'é', logprob: -1.25, bytes: [195, 169] },
          ],
        },
        {
          token: 'é',
          logprob: -9999,
          bytes: [195, 169],
          top_logprobs: [
            { token: 't4', logprob: -0.1, bytes: [116, 52] },
            { token: 't5', logprob: -2, bytes: [116, 53] },
          ],
        },
      ],
      refusal: null,
    });
    expectSpec('CreateChatCompletionResponse', body);
    expect(JSON.parse(JSON.stringify(body))).toStrictEqual(body);
  });

  it('gives empty top_logprobs when no alternatives were asked for', () => {
    expect(chatLogprobs([{ tokenId: 3, text: 't3', logprob: -1, topLogprobs: [] }], tokenText).content[0].top_logprobs).toEqual([]);
  });
});

describe('text_completion', () => {
  it('has exactly the OpenAI shape', () => {
    expect(textCompletion({ ...meta, id: 'cmpl-abc' }, { ...result, finishReason: 'stop' })).toStrictEqual({
      id: 'cmpl-abc',
      object: 'text_completion',
      created: 1700000000,
      model: 'stories260k',
      system_fingerprint: 'fp_meshnet',
      choices: [{ text: 't3é', index: 0, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7, prompt_tokens_details: { cached_tokens: 0 } },
    });
  });

  it('conforms to the OpenAI spec, with and without logprobs', () => {
    expectSpec('CreateCompletionResponse', textCompletion(meta, result));
    expectSpec('CreateCompletionResponse', textCompletion(meta, result, tokenText));
  });

  it('reports legacy logprobs: the chosen token is always in top_logprobs', () => {
    expect(textCompletion(meta, result, tokenText).choices[0].logprobs).toStrictEqual({
      tokens: ['t3', 'é'],
      token_logprobs: [-0.5, -9999],
      top_logprobs: [
        { t3: -0.5, 'é': -1.25 },
        { t4: -0.1, t5: -2, 'é': -9999 },
      ],
      text_offset: [0, 2],
    });
  });

  it('counts text offsets from a start and over held-back text', () => {
    const held: ChosenToken[] = [
      { tokenId: 3, text: '', logprob: -1, topLogprobs: [] },
      { tokenId: 4, text: 't3t4', logprob: -1, topLogprobs: [] },
      { tokenId: 5, text: 't5', logprob: -1, topLogprobs: [] },
    ];
    const lp = completionLogprobs(held, tokenText, 10);
    expect(lp.text_offset).toEqual([10, 10, 14]);
    expect(lp.top_logprobs).toEqual([{ t3: -1 }, { t4: -1 }, { t5: -1 }]);
  });

  it('keeps the likelier of two ids with the same text', () => {
    const same = (id: number) => (id < 10 ? 'x' : `t${id}`);
    const lp = completionLogprobs([{ tokenId: 2, text: 'x', logprob: -3, topLogprobs: [{ tokenId: 1, logprob: -0.5 }, { tokenId: 2, logprob: -3 }] }], same);
    expect(lp.top_logprobs).toEqual([{ x: -0.5 }]);
  });
});
