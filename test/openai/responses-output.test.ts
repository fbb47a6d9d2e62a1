/** Response objects and Responses stream events from session events; every one against the OpenAI spec. */
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/core/route/route-types.ts';
import { internalError } from '../../src/node/openai/errors.ts';
import type { ResponseEcho } from '../../src/node/openai/responses-echo.ts';
import { type ResponseContext, responseUsage, wholeResponse } from '../../src/node/openai/responses-output.ts';
import { ResponsesStreamBuilder, responsesStreamEvents, sseEvent } from '../../src/node/openai/responses-stream.ts';
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
    expect(body.output[0].content[0].logprobs).toStrictEqual([{ token: 'é', logprob: -9999, bytes: [195, 169], top_logprobs: [{ token: 't3', logprob: -0.1, bytes: [116, 51] }] }]);
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
