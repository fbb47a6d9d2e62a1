/**
 * `POST /v1/responses` through real clients against a real head on loopback (stories260k,
 * every layer on the head): the official `openai` client (`responses.create` whole and
 * streamed, `responses.stream`), the Vercel AI SDK's default OpenAI provider path
 * (`@ai-sdk/openai` → Responses; `generateText`, `streamText`), and raw hostile bodies. Every
 * body and event is checked against the OpenAI spec on the way (`specFetch`). The text must
 * equal what `/v1/chat/completions` gives for the same conversation: both build one chat
 * request.
 */
import path from 'node:path';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { tempDir } from '../engine/harness.ts';
import { specFetch } from '../openapi/spec-fetch.ts';
import { clientFor, eventually, postRaw, serveStories, thrown } from './api-harness.ts';

let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
let bare: ServingHead; // no layers and no peers: every request is a 503
let client: OpenAI;
let model: string;

beforeAll(async () => {
  home = await tempDir('api-responses');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  // One after the other: two heads building the same artifacts at once in one MESHNET_HOME
  // can race in the artifact cache (rename onto a folder the other just made).
  serving = await serveStories();
  bare = await serveStories({ headLayers: 'none' });
  client = clientFor(serving);
  model = serving.modelId;
});

afterAll(async () => {
  await serving?.close();
  await bare?.close();
  await home?.remove();
});

/** The chat route's greedy text (and finish reason) for `messages`. */
async function chatText(messages: OpenAI.Chat.ChatCompletionMessageParam[], maxTokens: number, extra: Record<string, unknown> = {}) {
  const completion = await client.chat.completions.create({ model, messages, max_completion_tokens: maxTokens, temperature: 0, ...extra });
  return { text: completion.choices[0].message.content!, finish: completion.choices[0].finish_reason, usage: completion.usage! };
}

const outputOf = (response: OpenAI.Responses.Response) => {
  expect(response.output).toHaveLength(1);
  const item = response.output[0] as OpenAI.Responses.ResponseOutputMessage;
  expect(item.type).toBe('message');
  expect(item.content).toHaveLength(1);
  return { item, text: (item.content[0] as OpenAI.Responses.ResponseOutputText).text };
};

describe('openai client: responses.create', () => {
  it('a string input answers like a one-message chat; max_output_tokens makes it incomplete', async () => {
    const response = await client.responses.create({ model, input: 'Tell me a story.', max_output_tokens: 12, temperature: 0 });
    const chat = await chatText([{ role: 'user', content: 'Tell me a story.' }], 12);
    expect(response.id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(response).toMatchObject({ object: 'response', model, status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, error: null, max_output_tokens: 12, temperature: 0 });
    const { item, text } = outputOf(response);
    expect(item).toMatchObject({ role: 'assistant', status: 'incomplete' });
    expect(item.id).toMatch(/^msg_/);
    expect(text).toBe(chat.text);
    expect(response.output_text).toBe(chat.text);
    expect(response.usage).toEqual({
      input_tokens: chat.usage.prompt_tokens,
      input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
      output_tokens: 12,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: chat.usage.prompt_tokens + 12,
    });
  });

  it('message items and instructions answer like the same chat messages', async () => {
    const response = await client.responses.create({
      model,
      instructions: 'You tell short stories.',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'Once upon a time' }] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'there was a cat.', annotations: [] }] } as never,
        { role: 'developer', content: 'Keep going.' },
        { role: 'user', content: 'And then?' },
      ],
      max_output_tokens: 8,
      temperature: 0,
      store: false,
      metadata: { test: 'items' },
      truncation: 'disabled',
      user: 'u-1',
      parallel_tool_calls: true,
      include: [],
    });
    const chat = await chatText(
      [
        { role: 'system', content: 'You tell short stories.' },
        { role: 'user', content: 'Once upon a time' },
        { role: 'assistant', content: 'there was a cat.' },
        { role: 'developer', content: 'Keep going.' },
        { role: 'user', content: 'And then?' },
      ],
      8,
    );
    expect(outputOf(response).text).toBe(chat.text);
    expect(response).toMatchObject({ instructions: 'You tell short stories.', metadata: { test: 'items' }, user: 'u-1', truncation: 'disabled' });
  });

  it('a model that stops is completed with completed_at (seed found through the chat route)', async () => {
    let seed = -1;
    let chat: Awaited<ReturnType<typeof chatText>> | undefined;
    for (let s = 0; s < 60 && seed < 0; s++) {
      chat = await chatText([{ role: 'user', content: 'hello' }], 16, { temperature: 1, seed: s });
      if (chat.finish === 'stop') seed = s;
    }
    expect(seed).toBeGreaterThanOrEqual(0);
    const response = await client.responses.create({ model, input: 'hello', max_output_tokens: 16, temperature: 1, seed } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    expect(response).toMatchObject({ status: 'completed', incomplete_details: null });
    expect(response.completed_at).toBeGreaterThanOrEqual(response.created_at);
    expect(outputOf(response)).toMatchObject({ item: { status: 'completed' }, text: chat!.text });
  });

  it('streams the standard event sequence; deltas add up to the whole answer', async () => {
    const whole = await client.responses.create({ model, input: 'Tell me a story.', max_output_tokens: 10, temperature: 0 });
    const stream = await client.responses.create({ model, input: 'Tell me a story.', max_output_tokens: 10, temperature: 0, stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 4)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    expect(types.slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.incomplete']);
    expect(new Set(types.slice(4, -4))).toEqual(new Set(['response.output_text.delta']));
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const deltas = events.filter((e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === 'response.output_text.delta');
    const text = outputOf(whole).text;
    expect(deltas.map((d) => d.delta).join('')).toBe(text);
    const last = events.at(-1) as OpenAI.Responses.ResponseIncompleteEvent;
    expect(new Set(events.flatMap((e) => ('response' in e ? [e.response.id] : [])))).toEqual(new Set([last.response.id]));
    expect(outputOf(last.response).text).toBe(text);
    expect(last.response.usage).toEqual(whole.usage);
  });

  it('responses.stream() assembles the final response from the events', async () => {
    const stream = client.responses.stream({ model, input: [{ role: 'user', content: 'hi' }], max_output_tokens: 6, temperature: 0 });
    let deltas = '';
    stream.on('response.output_text.delta', (e) => (deltas += e.delta));
    const final = await stream.finalResponse();
    expect(final.output_text).toBe(deltas);
    expect(final.output_text).toBe((await chatText([{ role: 'user', content: 'hi' }], 6)).text);
  });

  it('include message.output_text.logprobs gives per-token logprobs, streamed and not', async () => {
    const response = await client.responses.create({ model, input: 'hi', max_output_tokens: 4, temperature: 0, include: ['message.output_text.logprobs'], top_logprobs: 2 });
    const part = outputOf(response).item.content[0] as OpenAI.Responses.ResponseOutputText;
    expect(part.logprobs).toHaveLength(4);
    for (const lp of part.logprobs!) {
      expect(lp.top_logprobs).toHaveLength(2);
      expect(lp.top_logprobs[0].token).toBe(lp.token); // greedy: the chosen token is the likeliest
    }
    const stream = await client.responses.create({ model, input: 'hi', max_output_tokens: 4, temperature: 0, include: ['message.output_text.logprobs'], top_logprobs: 2, stream: true });
    const streamed: string[] = [];
    for await (const e of stream) if (e.type === 'response.output_text.delta') streamed.push(...e.logprobs.map((l) => l.token));
    expect(streamed).toEqual(part.logprobs!.map((l) => l.token));
  });

  it('a client that leaves mid-stream frees its session', async () => {
    const stream = await client.responses.create({ model, input: 'hi', max_output_tokens: 200, temperature: 0, stream: true });
    for await (const event of stream) if (event.type === 'response.output_text.delta') break;
    expect(await eventually(() => serving.tracker.liveSessions === 0)).toBe(true);
  });

  it('503 with Retry-After before any stream when no route can serve', async () => {
    const bareClient = clientFor(bare);
    for (const stream of [false, true]) {
      const error = (await thrown(() => bareClient.responses.create({ model, input: 'hi', stream }))) as { status: number; code: string; headers: Headers };
      expect(error.status).toBe(503);
      expect(error.code).toBe('route_unavailable');
      expect(error.headers.get('retry-after')).toBe('5');
    }
  });
});

describe('Vercel AI SDK: @ai-sdk/openai (its default model path is the Responses API)', () => {
  const provider = () => createOpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', fetch: specFetch });

  it('generateText answers like the chat route', async () => {
    const result = await generateText({ model: provider()(model), system: 'You tell stories.', prompt: 'A dragon', maxOutputTokens: 8, temperature: 0, maxRetries: 0 });
    const chat = await chatText([{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'A dragon' }], 8);
    expect(result.text).toBe(chat.text);
    expect(result.finishReason).toBe('length');
    expect(result.usage).toMatchObject({ inputTokens: chat.usage.prompt_tokens, outputTokens: 8, totalTokens: chat.usage.prompt_tokens + 8 });
    expect(result.response.id).toMatch(/^resp_/);
  });

  it('streamText streams the same text', async () => {
    const result = streamText({
      model: provider()(model),
      messages: [
        { role: 'user', content: 'A dragon' },
        { role: 'assistant', content: 'flew' },
        { role: 'user', content: 'over the hills' },
      ],
      maxOutputTokens: 8,
      temperature: 0,
      maxRetries: 0,
      onError: ({ error }) => {
        throw error;
      },
    });
    let text = '';
    for await (const delta of result.textStream) text += delta;
    const chat = await chatText(
      [
        { role: 'user', content: 'A dragon' },
        { role: 'assistant', content: 'flew' },
        { role: 'user', content: 'over the hills' },
      ],
      8,
    );
    expect(text).toBe(chat.text);
    expect(await result.finishReason).toBe('length');
  });
});

/** A JSON Schema nested `depth` levels deep (an object property per level). */
function nested(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: 'object' };
  for (let i = 1; i < depth; i++) schema = { type: 'object', properties: { a: schema } };
  return schema;
}

describe('hostile bodies over HTTP: 400 in the OpenAI error shape, never a 500', () => {
  const url = () => `${serving.head.url}v1/responses`;
  const post = (body: unknown) => postRaw(url(), typeof body === 'string' ? body : JSON.stringify(body));
  const bodies: [string, unknown, string | null][] = [
    ['malformed JSON', '{"model": "stories260k", "input": [', null],
    ['an array body', [], null],
    ['input a number', { model: 'stories260k', input: 1 }, 'input'],
    ['an unknown item type', { model: 'stories260k', input: [{ type: '__proto__', role: 'user', content: 'x' }] }, 'input[0].type'],
    ['a prototype-named role', { model: 'stories260k', input: [{ role: 'constructor', content: 'x' }] }, 'input[0].role'],
    ['deeply nested content', { model: 'stories260k', input: [{ role: 'user', content: [[[[[[{ type: 'input_text' }]]]]]] }] }, 'input[0].content[0]'],
    ['a web_search tool', { model: 'stories260k', input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    ['an image', { model: 'stories260k', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png' }] }] }, 'input[0].content[0].type'],
    ['previous_response_id', { model: 'stories260k', input: 'x', previous_response_id: 'resp_123' }, 'previous_response_id'],
    ['max_output_tokens as a float', { model: 'stories260k', input: 'x', max_output_tokens: 1.5 }, 'max_output_tokens'],
    ['metadata with an object value', { model: 'stories260k', input: 'x', metadata: { a: { b: 1 } } }, 'metadata.a'],
    ['a huge string input (beyond the context)', { model: 'stories260k', input: 't5 '.repeat(200_000) }, 'input'],
    ['max_output_tokens beyond the context', { model: 'stories260k', input: 'x', max_output_tokens: 100_000 }, 'input'],
    ['many items', { model: 'stories260k', input: Array.from({ length: 20_000 }, () => ({ role: 'user', content: 'x' })) }, 'input'],
    ['a tool schema nested 70 levels deep', { model: 'stories260k', input: 'x', tools: [{ type: 'function', name: 'f', parameters: nested(70) }] }, 'tools[0].parameters'],
    ['a text.format schema nested 70 levels deep', { model: 'stories260k', input: 'x', text: { format: { type: 'json_schema', name: 'x', schema: nested(70) } } }, 'text.format.schema'],
    // stories260k's word-level vocabulary cannot spell JSON: refused before the session starts.
    ['json_object on a vocabulary without JSON', { model: 'stories260k', input: 'x', text: { format: { type: 'json_object' } } }, 'text.format'],
    ['a required tool call on a vocabulary without JSON', { model: 'stories260k', input: 'x', tools: [{ type: 'function', name: 'f' }], tool_choice: 'required' }, 'tools'],
    ['a function_call_output without its call', { model: 'stories260k', input: [{ type: 'function_call_output', call_id: 'call_1', output: '{}' }] }, 'input[0].call_id'],
  ];

  it.each(bodies)('%s', async (_name, body, param) => {
    const { status, json } = await post(body);
    expect(status).toBe(400);
    const error = (json as { error: { param: string | null; type: string; message: string } }).error;
    expect(error.type).toBe('invalid_request_error');
    expect(error.param).toBe(param);
    expect(error.message.length).toBeLessThan(1000);
  });

  it('the head still serves afterwards', async () => {
    expect((await client.responses.create({ model, input: 'hi', max_output_tokens: 2 })).output).toHaveLength(1);
  });
});
