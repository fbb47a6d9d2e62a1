/**
 * The OpenAI API through the official `openai` client against a real head on loopback
 * (stories260k, every layer on the head): response and chunk shapes, usage, stop strings,
 * seeds, logprobs, and greedy output equal to `meshnet generate`.
 */
import path from 'node:path';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { runCli } from '../cli/run-cli.ts';
import { STORIES_GOLDEN, tempDir } from '../engine/harness.ts';
import { clientFor, serveStories, STORIES_DIR, storiesText } from './api-harness.ts';
import { specFetch } from '../openapi/spec-fetch.ts';

const GOLDEN_TEXT = storiesText(STORIES_GOLDEN);
const ID = /^[A-Za-z0-9]+$/;

let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
let client: OpenAI;
let model: string;

beforeAll(async () => {
  home = await tempDir('api');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  serving = await serveStories();
  client = clientFor(serving);
  model = serving.modelId;
});

afterAll(async () => {
  await serving?.close();
  await home?.remove();
});

function expectCreated(created: number) {
  expect(Number.isInteger(created)).toBe(true);
  expect(Math.abs(created - Date.now() / 1000)).toBeLessThan(120);
}

describe('models', () => {
  it('lists the served model under its folder name', async () => {
    const page = await client.models.list();
    expect(page.data.map((m) => m.id)).toEqual(['stories260k']);
    expect(page.data[0]).toMatchObject({ object: 'model', owned_by: 'meshnet' });
    expect((await client.models.retrieve('stories260k')).id).toBe('stories260k');
  });
});

describe('completions', () => {
  it('answers a whole text_completion with usage and finish_reason length', async () => {
    const completion = await client.completions.create({ model, prompt: [1], max_tokens: 32, temperature: 0 });
    expect(completion.id).toMatch(/^cmpl-/);
    expect(completion.id.slice(5)).toMatch(ID);
    expect(completion.object).toBe('text_completion');
    expect(completion.model).toBe(model);
    expectCreated(completion.created);
    expect(completion.choices).toHaveLength(1);
    expect(completion.choices[0]).toMatchObject({ index: 0, finish_reason: 'length', logprobs: null });
    expect(completion.choices[0].text).toBe(GOLDEN_TEXT);
    expect(completion.usage).toEqual({ prompt_tokens: 1, completion_tokens: 32, total_tokens: 33, prompt_tokens_details: { cached_tokens: 0 } });
  });

  it('streams text_completion chunks with one id, a final finish_reason and a usage chunk', async () => {
    const stream = await client.completions.create({ model, prompt: [1], max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.Completions.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const ids = new Set(chunks.map((c) => c.id));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(/^cmpl-/);
    for (const chunk of chunks) {
      expect(chunk.object).toBe('text_completion');
      expect(chunk.model).toBe(model);
      expectCreated(chunk.created);
    }
    const usageChunk = chunks.at(-1)!;
    expect(usageChunk.choices).toEqual([]);
    expect(usageChunk.usage).toEqual({ prompt_tokens: 1, completion_tokens: 8, total_tokens: 9, prompt_tokens_details: { cached_tokens: 0 } });
    const withChoices = chunks.slice(0, -1);
    for (const chunk of withChoices) expect('usage' in chunk).toBe(false); // the spec's completion usage is not nullable
    expect(withChoices.at(-1)!.choices[0].finish_reason).toBe('length');
    for (const chunk of withChoices.slice(0, -1)) expect(chunk.choices[0].finish_reason).toBeNull();
    expect(withChoices.map((c) => c.choices[0].text).join('')).toBe(storiesText(STORIES_GOLDEN.slice(0, 8)));
  });

  it('streams without a usage key when include_usage is not set', async () => {
    const stream = await client.completions.create({ model, prompt: [1], max_tokens: 3, temperature: 0, stream: true });
    const chunks: OpenAI.Completions.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    for (const chunk of chunks) expect('usage' in chunk).toBe(false);
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe('length');
  });

  it('takes a prompt string and a one-string array', async () => {
    const text = await client.completions.create({ model, prompt: 't461 t461', max_tokens: 2, temperature: 0 });
    const array = await client.completions.create({ model, prompt: ['t461 t461'], max_tokens: 2, temperature: 0 });
    expect(text.usage!.prompt_tokens).toBeGreaterThan(0);
    expect(array.choices[0].text).toBe(text.choices[0].text);
    expect(array.usage).toEqual(text.usage);
  });

  it('ends an SSE body with data: [DONE] (raw fetch)', async () => {
    const response = await specFetch(`${serving.head.url}v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, prompt: [1], max_tokens: 4, temperature: 0, stream: true }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const body = await response.text();
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
    const events = body.split('\n\n').filter((e) => e !== '');
    for (const event of events) expect(event).toMatch(/^data: /);
    expect(events.filter((e) => e === 'data: [DONE]')).toHaveLength(1);
  });

  it('logprobs: 2 gives token_logprobs and two alternatives per token', async () => {
    const completion = await client.completions.create({ model, prompt: [1], max_tokens: 4, temperature: 0, logprobs: 2 });
    const logprobs = completion.choices[0].logprobs!;
    expect(logprobs.tokens).toHaveLength(4);
    expect(logprobs.token_logprobs).toHaveLength(4);
    expect(logprobs.top_logprobs).toHaveLength(4);
    expect(logprobs.text_offset).toHaveLength(4);
    expect(logprobs.tokens!.map((t) => t.trim())).toEqual(['t461', 't461', 't401', 't401']);
    logprobs.top_logprobs!.forEach((top, i) => {
      const values = Object.values(top);
      expect(values).toHaveLength(2);
      expect(logprobs.token_logprobs![i]).toBeLessThanOrEqual(0);
      // Greedy: the chosen token is the most likely one.
      expect(logprobs.token_logprobs![i]).toBeCloseTo(Math.max(...values), 5);
    });
    expect(logprobs.text_offset![0]).toBe(0);
  });
});

describe('chat', () => {
  it('answers a whole chat.completion (fallback template) with usage', async () => {
    const completion = await client.chat.completions.create({
      model,
      messages: [
        { role: 'system', content: 'You tell stories.' },
        { role: 'user', content: [{ type: 'text', text: 'Once upon a time' }] },
      ],
      max_tokens: 6,
      temperature: 0,
    });
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.id.slice(9)).toMatch(ID);
    expect(completion.object).toBe('chat.completion');
    expect(completion.model).toBe(model);
    expectCreated(completion.created);
    expect(completion.choices).toHaveLength(1);
    const [choice] = completion.choices;
    expect(choice.index).toBe(0);
    expect(choice.message.role).toBe('assistant');
    expect(typeof choice.message.content).toBe('string');
    expect(choice.finish_reason).toBe('length');
    expect(choice.logprobs).toBeNull();
    expect(completion.usage!.completion_tokens).toBe(6);
    expect(completion.usage!.prompt_tokens).toBeGreaterThan(0);
    expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + 6);
  });

  it('streams a role chunk, content deltas, finish_reason, then usage; the text equals the whole answer', async () => {
    const request = { model, messages: [{ role: 'user' as const, content: 'Hello' }], max_tokens: 6, temperature: 0 };
    const whole = await client.chat.completions.create(request);
    const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks[0].id).toMatch(/^chatcmpl-/);
    for (const chunk of chunks) {
      expect(chunk.object).toBe('chat.completion.chunk');
      expect(chunk.model).toBe(model);
      expectCreated(chunk.created);
    }
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toEqual(whole.usage);
    const last = chunks.at(-2)!;
    expect(last.choices[0].finish_reason).toBe('length');
    expect(last.choices[0].delta).toEqual({});
    for (const chunk of chunks.slice(0, -2)) {
      expect(chunk.choices[0].finish_reason).toBeNull();
      expect(chunk.usage).toBeNull();
    }
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe(whole.choices[0].message.content);
  });

  it('logprobs with top_logprobs 3: one entry per token, the chosen token is the top alternative', async () => {
    const completion = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'Hello' }],
      max_tokens: 5,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
    });
    const content = completion.choices[0].logprobs!.content!;
    expect(content).toHaveLength(5);
    for (const entry of content) {
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(entry.top_logprobs).toHaveLength(3);
      expect(entry.top_logprobs[0].token).toBe(entry.token);
      expect(entry.logprob).toBeCloseTo(entry.top_logprobs[0].logprob, 5);
      expect(entry.top_logprobs[0].logprob).toBeGreaterThanOrEqual(entry.top_logprobs[1].logprob);
      expect(entry.top_logprobs[1].logprob).toBeGreaterThanOrEqual(entry.top_logprobs[2].logprob);
      expect(entry.bytes).toEqual([...Buffer.from(entry.token)]);
    }
  });

  it('streams logprobs on each content chunk', async () => {
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'Hello' }],
      max_tokens: 3,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
      stream: true,
    });
    const entries: OpenAI.Chat.ChatCompletionTokenLogprob[] = [];
    for await (const chunk of stream) entries.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    expect(entries).toHaveLength(3);
    for (const entry of entries) expect(entry.top_logprobs).toHaveLength(3);
  });
});

describe('stop strings', () => {
  it('stop t401 ends a completion with finish_reason stop before the stop string', async () => {
    const completion = await client.completions.create({ model, prompt: [1], max_tokens: 32, temperature: 0, stop: ['t401'] });
    expect(completion.choices[0].finish_reason).toBe('stop');
    expect(completion.choices[0].text).not.toContain('t401');
    expect(completion.choices[0].text.trim()).toBe('t461 t461');
  });

  it('stop t401 never leaks into streamed completion text', async () => {
    const stream = await client.completions.create({ model, prompt: [1], max_tokens: 32, temperature: 0, stop: 't401', stream: true });
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('stop');
    expect(text).not.toContain('t401');
    expect(text.trim()).toBe('t461 t461');
  });

  it('a stop string never leaks into streamed chat deltas', async () => {
    const request = { model, messages: [{ role: 'user' as const, content: 'Hello' }], max_tokens: 12, temperature: 0 };
    const whole = await client.chat.completions.create(request);
    // Stop on the third word of the greedy answer, split across token boundaries' spaces.
    const words = whole.choices[0].message.content!.trim().split(' ');
    expect(words.length).toBeGreaterThan(3);
    const stop = words[2];
    const stream = await client.chat.completions.create({ ...request, stop: [stop], stream: true });
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('stop');
    expect(text).not.toContain(stop);
    expect(whole.choices[0].message.content!.startsWith(text)).toBe(true);
  });
});

describe('seeds', () => {
  const sample = async (seed: number) =>
    (await client.completions.create({ model, prompt: [1], max_tokens: 16, temperature: 0.8, seed })).choices[0].text;

  it('the same seed gives the same text twice at temperature 0.8', async () => {
    const first = await sample(1234);
    expect(await sample(1234)).toBe(first);
  });

  it('different seeds do not all give the same text', async () => {
    const texts = await Promise.all([1, 2, 3, 4, 5].map(sample));
    expect(new Set(texts).size).toBeGreaterThan(1);
  });

  it('a chat request with a seed is reproducible', async () => {
    const request = { model, messages: [{ role: 'user' as const, content: 'Hello' }], max_tokens: 10, temperature: 0.8, seed: 7 };
    const a = await client.chat.completions.create(request);
    const b = await client.chat.completions.create(request);
    expect(b.choices[0].message.content).toBe(a.choices[0].message.content);
  });
});

describe('greedy equals meshnet generate', () => {
  it('/v1/completions from [1] at temperature 0 equals the CLI text and token ids', async () => {
    const cli = await runCli(['generate', '--model', STORIES_DIR, '--prompt-ids', '1', '--max-tokens', '32', '--temperature', '0', '--device', 'cpu', '--json'], {
      MESHNET_HOME: process.env.MESHNET_HOME,
    });
    expect(cli.code, cli.stderr).toBe(0);
    const out = JSON.parse(cli.stdout.trim());
    const api = await client.completions.create({ model, prompt: [1], max_tokens: 32, temperature: 0 });
    expect(api.choices[0].text).toBe(out.text);
    expect(api.choices[0].finish_reason).toBe(out.finish_reason);
    expect(out.token_ids).toEqual(STORIES_GOLDEN);
    expect(api.choices[0].text).toBe(storiesText(out.token_ids));
  });
});
