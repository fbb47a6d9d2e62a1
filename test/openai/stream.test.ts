import { describe, expect, it } from 'vitest';
import { TOOL_CALL_FORMATS } from '../../src/core/model/tools/tool-call-format.ts';
import { ToolCallStream } from '../../src/core/model/tools/tool-call-stream.ts';
import type { SessionEvent } from '../../src/core/route/route-types.ts';
import { expectSpec } from '../openapi/spec-fetch.ts';
import { COMPLETION_STREAM_CHUNK } from '../openapi/spec-schemas.ts';
import { chatCompletion, type ResponseMeta } from '../../src/node/openai/responses.ts';
import {
  ChatStreamBuilder,
  CompletionStreamBuilder,
  chatStreamChunks,
  collectGeneration,
  completionStreamChunks,
  type StreamOptions,
} from '../../src/node/openai/stream.ts';

const meta: ResponseMeta = { id: 'chatcmpl-1', created: 1700000000, model: 'm', systemFingerprint: 'fp_x' };
const tokenText = (id: number) => `t${id}`;
const head = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1700000000, model: 'm', system_fingerprint: 'fp_x' } as const;
const textHead = { id: 'chatcmpl-1', object: 'text_completion', created: 1700000000, model: 'm', system_fingerprint: 'fp_x' } as const;

/** t1, then t2 whose text is held back (a stop string might start), then the tail released at done. */
const events: SessionEvent[] = [
  { type: 'token', tokenId: 1, text: 't1', logprob: -0.5, topLogprobs: [{ tokenId: 1, logprob: -0.5 }] },
  { type: 'token', tokenId: 2, text: '', logprob: -1, topLogprobs: [{ tokenId: 9, logprob: -0.25 }] },
  { type: 'done', finishReason: 'length', text: 't2', usage: { promptTokens: 4, completionTokens: 2 } },
];
const usage = { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6, prompt_tokens_details: { cached_tokens: 0 } };

const options = (includeUsage: boolean, logprobs: boolean): StreamOptions => ({ meta, includeUsage, logprobs, tokenText });

describe('chat stream', () => {
  it('role chunk, content chunks, tail, final chunk', () => {
    expect(chatStreamChunks(events, options(false, false))).toStrictEqual([
      { ...head, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] },
      { ...head, choices: [{ index: 0, delta: { content: 't1' }, logprobs: null, finish_reason: null }] },
      { ...head, choices: [{ index: 0, delta: { content: 't2' }, logprobs: null, finish_reason: null }] },
      { ...head, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'length' }] },
    ]);
  });

  it('with include_usage: usage null on every chunk, then a usage chunk with no choices', () => {
    const chunks = chatStreamChunks(events, options(true, false));
    expect(chunks).toHaveLength(5);
    for (const chunk of chunks.slice(0, 4)) expect(chunk.usage).toBeNull();
    expect(chunks[4]).toStrictEqual({ ...head, choices: [], usage });
    expect(Object.keys(chunks[0])).toEqual(['id', 'object', 'created', 'model', 'system_fingerprint', 'choices', 'usage']);
  });

  it('with logprobs: one chunk per token, even when its text is held back', () => {
    const chunks = chatStreamChunks(events, options(false, true));
    expect(chunks.map((c) => c.choices[0].delta)).toEqual([{ role: 'assistant', content: '' }, { content: 't1' }, { content: '' }, { content: 't2' }, {}]);
    expect(chunks[1].choices[0].logprobs).toStrictEqual({
      content: [{ token: 't1', logprob: -0.5, bytes: [116, 49], top_logprobs: [{ token: 't1', logprob: -0.5, bytes: [116, 49] }] }],
      refusal: null,
    });
    expect(chunks[2].choices[0].logprobs).toStrictEqual({
      content: [{ token: 't2', logprob: -1, bytes: [116, 50], top_logprobs: [{ token: 't9', logprob: -0.25, bytes: [116, 57] }] }],
      refusal: null,
    });
    expect(chunks[0].choices[0].logprobs).toBeNull();
    expect(chunks[3].choices[0].logprobs).toBeNull();
    expect(chunks[4].choices[0].logprobs).toBeNull();
  });

  it('with logprobs and include_usage', () => {
    const chunks = chatStreamChunks(events, options(true, true));
    expect(chunks).toHaveLength(6);
    expect(chunks.at(-1)).toStrictEqual({ ...head, choices: [], usage });
  });

  it('a stop right away: role chunk and final chunk only', () => {
    const stopped: SessionEvent[] = [{ type: 'done', finishReason: 'stop', text: '', usage: { promptTokens: 4, completionTokens: 1 } }];
    expect(chatStreamChunks(stopped, options(false, false)).map((c) => [c.choices[0].delta, c.choices[0].finish_reason])).toEqual([
      [{ role: 'assistant', content: '' }, null],
      [{}, 'stop'],
    ]);
  });

  it('start() sends the role chunk once; push adds it if start was not called; nothing after done', () => {
    const early = new ChatStreamBuilder(options(false, false));
    expect(early.start()).toHaveLength(1);
    expect(early.start()).toEqual([]);
    expect(early.push(events[0])).toHaveLength(1);

    const late = new ChatStreamBuilder(options(false, false));
    expect(late.push(events[0]).map((c) => c.choices[0].delta)).toEqual([{ role: 'assistant', content: '' }, { content: 't1' }]);
    late.push(events[2]);
    expect(() => late.push(events[0])).toThrow(/after done/);
  });
});

describe('every chunk conforms to the OpenAI spec', () => {
  const combos = [false, true].flatMap((includeUsage) => [false, true].map((logprobs) => options(includeUsage, logprobs)));
  it.each(combos.map((o) => [o.includeUsage, o.logprobs, o]))('include_usage %s, logprobs %s', (_u, _l, o) => {
    for (const chunk of chatStreamChunks(events, o)) expectSpec('CreateChatCompletionStreamResponse', chunk);
    for (const chunk of completionStreamChunks(events, o)) expectSpec(COMPLETION_STREAM_CHUNK, chunk);
  });
});

describe('completion stream', () => {
  it('text chunks, tail, final chunk with empty text', () => {
    expect(completionStreamChunks(events, options(false, false))).toStrictEqual([
      { ...textHead, choices: [{ text: 't1', index: 0, logprobs: null, finish_reason: null }] },
      { ...textHead, choices: [{ text: 't2', index: 0, logprobs: null, finish_reason: null }] },
      { ...textHead, choices: [{ text: '', index: 0, logprobs: null, finish_reason: 'length' }] },
    ]);
  });

  it('with include_usage: no usage key (the spec has no null usage here), then a usage chunk with no choices', () => {
    const chunks = completionStreamChunks(events, options(true, false));
    expect(chunks.map((c) => 'usage' in c)).toEqual([false, false, false, true]);
    expect(chunks[3]).toStrictEqual({ ...textHead, choices: [], usage });
  });

  it('with logprobs: per-token legacy logprobs with running text offsets', () => {
    const more: SessionEvent[] = [events[0], events[1], { type: 'token', tokenId: 3, text: 't2t3', logprob: -2, topLogprobs: [] }, events[2]];
    const chunks = completionStreamChunks(more, options(false, true));
    expect(chunks.map((c) => c.choices[0].logprobs)).toStrictEqual([
      { tokens: ['t1'], token_logprobs: [-0.5], top_logprobs: [{ t1: -0.5 }], text_offset: [0] },
      { tokens: ['t2'], token_logprobs: [-1], top_logprobs: [{ t9: -0.25, t2: -1 }], text_offset: [2] },
      { tokens: ['t3'], token_logprobs: [-2], top_logprobs: [{ t3: -2 }], text_offset: [2] },
      null,
      null,
    ]);
    expect(chunks.map((c) => c.choices[0].text)).toEqual(['t1', '', 't2t3', 't2', '']);
    expect(new CompletionStreamBuilder(options(false, false)).push(events[2]).map((c) => c.choices[0].finish_reason)).toEqual([null, 'length']);
  });
});

async function* from(list: SessionEvent[], thenThrow?: Error): AsyncGenerator<SessionEvent> {
  yield* list;
  if (thenThrow) throw thenThrow;
}

describe('collectGeneration', () => {
  it('joins token texts and the tail, keeps tokens and usage', async () => {
    const result = await collectGeneration(from(events));
    expect(result.text).toBe('t1t2');
    expect(result.finishReason).toBe('length');
    expect(result.usage).toEqual({ promptTokens: 4, completionTokens: 2 });
    expect(result.tokens.map((t) => t.tokenId)).toEqual([1, 2]);
  });

  it('propagates session errors and refuses a stream without done', async () => {
    await expect(collectGeneration(from(events.slice(0, 1), new Error('hop lost')))).rejects.toThrow('hop lost');
    await expect(collectGeneration(from(events.slice(0, 2)))).rejects.toThrow(/without a done event/);
  });
});

describe('chat stream with tool calls', () => {
  const specials = { additional: [], ids: new Map<string, number>() };
  const tok = (tokenId: number, text: string): SessionEvent => ({ type: 'token', tokenId, text, logprob: -0.5, topLogprobs: [] });
  const answer = ['Sure', '<tool_call>\n{"name": "', 'get_time', '", "arguments": {"zone"', ': "utc"}', '}\n</tool_call>'];

  it('content, then the call (index, id, type, name), then its arguments; finish tool_calls', () => {
    let n = 0;
    const tools = new ToolCallStream(TOOL_CALL_FORMATS.hermes, specials, () => `call_${++n}`);
    const events: SessionEvent[] = [...answer.map((text, i) => tok(i + 10, text)), { type: 'done', finishReason: 'stop', text: '', usage: { promptTokens: 3, completionTokens: 6 } }];
    const chunks = chatStreamChunks(events, { ...options(false, true), tools });
    const deltas = chunks.map((c) => c.choices[0]?.delta);
    expect(deltas[0]).toEqual({ role: 'assistant', content: '' });
    expect(deltas[1]).toEqual({ content: 'Sure' });
    expect(chunks[1].choices[0].logprobs?.content[0].token).toBe('t10'); // a content token keeps its logprobs
    expect(deltas[2]).toEqual({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get_time', arguments: '' } }] });
    const args = deltas.flatMap((d) => d?.tool_calls ?? []).slice(1).map((t) => t.function.arguments).join('');
    expect(JSON.parse(args)).toEqual({ zone: 'utc' });
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe('tool_calls');
    expect(tools.calls).toEqual([{ id: 'call_1', name: 'get_time', arguments: '{"zone": "utc"}' }]);
    for (const chunk of chunks) expectSpec('CreateChatCompletionStreamResponse', chunk);
  });

  it('the whole answer: tool_calls in the message, content null without other text, finish tool_calls', async () => {
    const events: SessionEvent[] = [...answer.slice(1).map((text, i) => tok(i + 10, text)), { type: 'done', finishReason: 'stop', text: '', usage: { promptTokens: 3, completionTokens: 5 } }];
    const result = await collectGeneration(from(events));
    const read = new ToolCallStream(TOOL_CALL_FORMATS.hermes, specials, () => 'call_1').read(result.tokens, result.text);
    const body = chatCompletion(meta, result, undefined, read);
    expect(body.choices[0].message).toEqual({ role: 'assistant', content: null, refusal: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_time', arguments: '{"zone": "utc"}' } }] });
    expect(body.choices[0].finish_reason).toBe('tool_calls');
    expectSpec('CreateChatCompletionResponse', body);
  });

  it('a call cut by the token budget still finishes as length', () => {
    const tools = new ToolCallStream(TOOL_CALL_FORMATS.hermes, specials, () => 'call_x');
    const events: SessionEvent[] = [...answer.slice(0, 4).map((text, i) => tok(i, text)), { type: 'done', finishReason: 'length', text: '', usage: { promptTokens: 3, completionTokens: 4 } }];
    expect(chatStreamChunks(events, { ...options(false, false), tools }).at(-1)!.choices[0].finish_reason).toBe('length');
  });

  it('a special marker token gets its text back (Mistral [TOOL_CALLS])', () => {
    const tools = new ToolCallStream(TOOL_CALL_FORMATS.mistral, { additional: [], ids: new Map([['[TOOL_CALLS]', 5]]) }, () => 'abcdefghi');
    tools.token(5, ''); // the session streams special tokens as ''
    tools.token(6, '[{"name": "f", "arguments": {}}]');
    tools.finish('');
    expect(tools.calls).toEqual([{ id: 'abcdefghi', name: 'f', arguments: '{}' }]);
    expect(tools.text).toBe('');
  });
});
