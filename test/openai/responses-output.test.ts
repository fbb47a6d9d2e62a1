/** Response objects and Responses stream events from session events; every one against the OpenAI spec. */
import { describe, expect, it } from 'vitest';
import { TOOL_CALL_FORMATS } from '../../src/core/model/tools/tool-call-format.ts';
import { ToolCallStream } from '../../src/core/model/tools/tool-call-stream.ts';
import type { SessionEvent } from '../../src/core/route/route-types.ts';
import { internalError } from '../../src/node/openai/errors.ts';
import type { ResponseEcho } from '../../src/node/openai/responses-echo.ts';
import { type FunctionCallItem, type OutputMessage, type ResponseContext, responseUsage } from '../../src/node/openai/responses-output.ts';
import { ResponsesStreamBuilder, responsesStreamEvents, sseEvent, wholeResponse } from '../../src/node/openai/responses-stream.ts';
import { expectSpec } from '../openapi/spec-fetch.ts';

const echo: ResponseEcho = {
  instructions: 'Be brief.',
  maxOutputTokens: 3,
  temperature: 0,
  topP: 1,
  topLogprobs: 1,
  metadata: { run: '7' },
  user: 'u-1',
  safetyIdentifier: null,
  promptCacheKey: null,
  truncation: 'disabled',
  parallelToolCalls: true,
  toolChoice: 'auto',
  tools: [],
  textFormat: { type: 'text' },
  verbosity: 'medium',
};
const meta = { id: 'resp_abc', created: 1700000000, model: 'm', systemFingerprint: 'fp' };
const ctx = (logprobs = false): ResponseContext => ({ meta, echo, tokenText: (id) => (id === 7 ? 'é' : `t${id}`), logprobs });
const now = () => 1700000005;

const token = (tokenId: number, text: string): SessionEvent => ({ type: 'token', tokenId, text, logprob: -0.5, topLogprobs: [{ tokenId, logprob: -0.5 }] });
/** t1, a held-back token, its text released at done. */
const stopped: SessionEvent[] = [token(1, 't1'), token(7, ''), { type: 'done', finishReason: 'stop', text: 'é', usage: { promptTokens: 4, completionTokens: 2 } }];
const cut: SessionEvent[] = [token(1, 't1'), token(2, ' t2'), { type: 'done', finishReason: 'length', text: '', usage: { promptTokens: 4, completionTokens: 2 } }];

describe('the whole Response', () => {
  it('a stop is completed, with the message item, usage and the echoed settings', () => {
    const body = wholeResponse(ctx(), { text: 't1é', finishReason: 'stop', usage: { promptTokens: 4, completionTokens: 2 }, tokens: [] }, 1700000005);
    expectSpec('Response', body);
    expect(body).toMatchObject({
      id: 'resp_abc',
      object: 'response',
      created_at: 1700000000,
      completed_at: 1700000005,
      status: 'completed',
      incomplete_details: null,
      error: null,
      instructions: 'Be brief.',
      max_output_tokens: 3,
      temperature: 0,
      top_p: 1,
      user: 'u-1',
      metadata: { run: '7' },
      output: [{ id: 'msg_abc', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 't1é', annotations: [], logprobs: [] }] }],
      usage: { input_tokens: 4, input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 6 },
    });
  });

  it('a length finish is incomplete: max_output_tokens, no completed_at', () => {
    const body = wholeResponse(ctx(), { text: 't1', finishReason: 'length', usage: { promptTokens: 4, completionTokens: 3 }, tokens: [] }, 1700000005);
    expectSpec('Response', body);
    expect(body).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, completed_at: null, output: [{ status: 'incomplete' }] });
  });

  it('logprobs carry token, bytes and alternatives', () => {
    const tokens = [{ tokenId: 7, text: 'é', logprob: -Infinity, topLogprobs: [{ tokenId: 3, logprob: -0.1 }] }];
    const body = wholeResponse(ctx(true), { text: 'é', finishReason: 'stop', usage: { promptTokens: 1, completionTokens: 1 }, tokens }, 1);
    expectSpec('Response', body);
    expect((body.output[0] as OutputMessage).content[0].logprobs).toStrictEqual([{ token: 'é', logprob: -9999, bytes: [195, 169], top_logprobs: [{ token: 't3', logprob: -0.1, bytes: [116, 51] }] }]);
  });

  it('maps usage', () => {
    expect(responseUsage({ promptTokens: 2, completionTokens: 5 }).total_tokens).toBe(7);
  });
});

describe('the stream', () => {
  it('has the standard event sequence, numbered from 0, every event valid', () => {
    const events = responsesStreamEvents(stopped, ctx(), now);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    for (const event of events) expectSpec('ResponseStreamEvent', event);
    expect(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta)).toEqual(['t1', 'é']);
    expect(events[0]).toMatchObject({ response: { status: 'in_progress', output: [], completed_at: null } });
    expect('usage' in (events[0].response as object)).toBe(false);
    expect(events[2]).toMatchObject({ output_index: 0, item: { id: 'msg_abc', status: 'in_progress', content: [] } });
    expect(events[6]).toMatchObject({ item_id: 'msg_abc', output_index: 0, content_index: 0, text: 't1é' });
  });

  it('ends in exactly the object a whole response is', () => {
    const events = responsesStreamEvents(stopped, ctx(true), now);
    const whole = wholeResponse(
      ctx(true),
      { text: 't1é', finishReason: 'stop', usage: { promptTokens: 4, completionTokens: 2 }, tokens: stopped.filter((e) => e.type === 'token') as never },
      now(),
    );
    expect(events.at(-1)!.response).toStrictEqual(whole);
  });

  it('a length finish ends with response.incomplete', () => {
    const events = responsesStreamEvents(cut, ctx(), now);
    expect(events.at(-1)).toMatchObject({ type: 'response.incomplete', response: { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } } });
    expect(events.at(-2)).toMatchObject({ type: 'response.output_item.done', item: { status: 'incomplete' } });
    for (const event of events) expectSpec('ResponseStreamEvent', event);
  });

  it('with logprobs, a held-back token still gets its delta event (empty text)', () => {
    const events = responsesStreamEvents(stopped, ctx(true), now);
    const deltas = events.filter((e) => e.type === 'response.output_text.delta');
    expect(deltas.map((e) => [e.delta, (e.logprobs as unknown[]).length])).toEqual([
      ['t1', 1],
      ['', 1],
      ['é', 0],
    ]);
    for (const event of events) expectSpec('ResponseStreamEvent', event);
  });

  it('a failure mid-stream is response.failed with the text so far; nothing after it', () => {
    const builder = new ResponsesStreamBuilder(ctx(), now);
    builder.start();
    builder.push(stopped[0]);
    const [failed] = builder.fail(internalError(new Error('peer gone')));
    expectSpec('ResponseStreamEvent', failed);
    expect(failed).toMatchObject({
      type: 'response.failed',
      sequence_number: 5,
      response: { status: 'failed', error: { code: 'server_error', message: 'The server had an error while processing your request.' }, output: [{ status: 'incomplete', content: [{ text: 't1' }] }] },
    });
    expect(builder.fail(internalError())).toEqual([]);
    expect(() => builder.push(stopped[0])).toThrow(/after the end/);
  });

  it('frames events as named SSE events', () => {
    const [created] = responsesStreamEvents([], ctx(), now);
    expect(sseEvent(created)).toMatch(/^event: response\.created\ndata: \{"type":"response\.created","sequence_number":0,.*\}\n\n$/);
  });
});

describe('function calls', () => {
  const weather = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
  const toolEcho: ResponseEcho = {
    ...echo,
    tools: [{ type: 'function', name: 'get_weather', description: null, parameters: weather, strict: true }],
    toolChoice: { type: 'function', name: 'get_weather' },
    textFormat: { type: 'json_schema', name: 'w', schema: weather, strict: true },
  };
  const withTools = (logprobs = false): ResponseContext => {
    let n = 0;
    return { ...ctx(logprobs), echo: toolEcho, tools: new ToolCallStream(TOOL_CALL_FORMATS.hermes, { additional: [], ids: new Map() }, () => `call_${++n}`) };
  };
  const texts = (list: string[], finishReason: 'stop' | 'length' = 'stop'): SessionEvent[] => [
    ...list.map((text, i) => token(i + 10, text)),
    { type: 'done', finishReason, text: '', usage: { promptTokens: 4, completionTokens: list.length } },
  ];
  const oslo = ['<tool_call>\n{"name": "', 'get_weather', '", "arguments": {"city"', ': "Oslo"}', '}\n</tool_call>'];
  const rome = ['\n<tool_call>\n{"name": "get_weather", "arguments": ', '{"city": "Rome"}}\n</tool_call>'];

  it('text, then a call: a message item, then a function_call item with argument deltas; every event valid', () => {
    const events = responsesStreamEvents(texts(['Sure', ...oslo]), withTools(true), now);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    for (const event of events) expectSpec('ResponseStreamEvent', event);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events[4]).toMatchObject({ delta: 'Sure', logprobs: [{ token: 't10' }] });
    expect(events[8]).toMatchObject({ output_index: 1, item: { id: 'fc_abc_1', type: 'function_call', status: 'in_progress', call_id: 'call_1', name: 'get_weather', arguments: '' } });
    const deltas = events.filter((e) => e.type === 'response.function_call_arguments.delta');
    expect(deltas.every((e) => e.item_id === 'fc_abc_1' && e.output_index === 1)).toBe(true);
    expect(JSON.parse(deltas.map((e) => e.delta).join(''))).toEqual({ city: 'Oslo' });
    expect(events[11]).toMatchObject({ item_id: 'fc_abc_1', name: 'get_weather', output_index: 1, arguments: '{"city": "Oslo"}' });
    const response = events.at(-1)!.response as { output: unknown[]; tools: unknown; text: unknown; tool_choice: unknown };
    expect(response.output).toEqual([
      { id: 'msg_abc', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Sure', annotations: [], logprobs: [expect.objectContaining({ token: 't10' })] }] },
      { id: 'fc_abc_1', type: 'function_call', status: 'completed', arguments: '{"city": "Oslo"}', call_id: 'call_1', name: 'get_weather' },
    ]);
    expect(response).toMatchObject({ tools: toolEcho.tools, tool_choice: toolEcho.toolChoice, text: { format: toolEcho.textFormat } });
  });

  it('the whole Response is the stream\'s last object', () => {
    const events = texts(['Sure', ...oslo, ...rome]);
    const tokens = events.filter((e) => e.type === 'token') as never;
    const whole = wholeResponse(withTools(), { text: events.map((e) => e.text).join(''), finishReason: 'stop', usage: { promptTokens: 4, completionTokens: 8 }, tokens }, now());
    expectSpec('Response', whole);
    expect(responsesStreamEvents(events, withTools(), now).at(-1)!.response).toStrictEqual(whole);
    expect(whole.output.map((item) => item.type)).toEqual(['message', 'function_call', 'function_call']);
    expect((whole.output[2] as FunctionCallItem).arguments).toBe('{"city": "Rome"}');
    expect(whole.output.map((item) => item.id)).toEqual(['msg_abc', 'fc_abc_1', 'fc_abc_2']);
  });

  it('calls only: whitespace before the first call is no message', () => {
    const events = responsesStreamEvents(texts(['\n', ...oslo, ...rome]), withTools(), now);
    for (const event of events) expectSpec('ResponseStreamEvent', event);
    const output = (events.at(-1)!.response as { output: FunctionCallItem[] }).output;
    expect(output.map((item) => [item.type, item.id, item.call_id])).toEqual([
      ['function_call', 'fc_abc', 'call_1'],
      ['function_call', 'fc_abc_1', 'call_2'],
    ]);
  });

  it('tools offered but no call: the text is one message, whitespace included', () => {
    for (const answer of [['Hi', ' there'], [' ', '\n']]) {
      const output = (responsesStreamEvents(texts(answer), withTools(), now).at(-1)!.response as { output: OutputMessage[] }).output;
      expect(output).toHaveLength(1);
      expect(output[0].content[0].text).toBe(answer.join(''));
    }
  });

  it('a call cut by max_output_tokens is incomplete, and so is the response', () => {
    const events = responsesStreamEvents(texts(oslo.slice(0, 3), 'length'), withTools(), now);
    for (const event of events) expectSpec('ResponseStreamEvent', event);
    expect(events.at(-1)).toMatchObject({ type: 'response.incomplete', response: { status: 'incomplete', output: [{ type: 'function_call', status: 'incomplete', arguments: '{"city"' }] } });
  });

  it('a failure inside a call: response.failed holds the call so far, incomplete', () => {
    const builder = new ResponsesStreamBuilder(withTools(), now);
    builder.start();
    for (const event of texts(oslo.slice(0, 3)).slice(0, 3)) builder.push(event);
    const [failed] = builder.fail(internalError(new Error('peer gone')));
    expectSpec('ResponseStreamEvent', failed);
    expect(failed).toMatchObject({ type: 'response.failed', response: { status: 'failed', output: [{ type: 'function_call', status: 'incomplete', name: 'get_weather' }] } });
  });
});
