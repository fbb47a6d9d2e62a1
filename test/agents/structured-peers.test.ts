/**
 * Constrained sampling when the layers run on peer processes over sockets (the head holds
 * none): the grammar lives where the sampler is, so JSON and tool calls are just as valid.
 * (The one-process path is test/agents/structured-clients.test.ts.)
 */
import path from 'node:path';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { serveStories } from '../api/api-harness.ts';
import { tempDir } from '../engine/harness.ts';
import { writeQwenChatModel } from '../fixtures/qwen-chat-model.ts';
import { specFetch } from '../openapi/spec-fetch.ts';

let home: { dir: string; remove: () => Promise<void> };
let model: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
let client: OpenAI;

beforeAll(async () => {
  home = await tempDir('agents-peers');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  model = await writeQwenChatModel();
  serving = await serveStories({ model: model.dir, headLayers: 'none', localPeers: 2, link: 'direct' });
  await serving.head.waitForPeers(2, 60_000);
  client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000, fetch: specFetch });
});

afterAll(async () => {
  await serving?.close();
  await model?.remove();
  await home?.remove();
});

const schema = {
  type: 'object',
  properties: { label: { type: 'string', maxLength: 6 }, score: { type: 'integer', minimum: 1, maximum: 5 }, tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 2 } },
  required: ['label', 'score', 'tags'],
  additionalProperties: false,
} as const;

it('json_schema over two socket peers: valid JSON, finish_reason stop', async () => {
  const validate = new Ajv().compile(schema);
  for (const seed of [1, 2, 3]) {
    const answer = await client.chat.completions.create({ model: serving.modelId, messages: [{ role: 'user', content: 'Rate it.' }], seed, max_tokens: 1024, response_format: { type: 'json_schema', json_schema: { name: 'rating', schema } } });
    expect(answer.choices[0].finish_reason).toBe('stop');
    expect(validate(JSON.parse(answer.choices[0].message.content ?? ''))).toBe(true);
  }
  // Every layer ran on the two peer processes, none in the head.
  const hops = serving.store.state.finished[0].hops;
  expect(hops.length).toBe(2);
  expect(hops.every((hop) => hop.peerId !== 'head')).toBe(true);
});

it('a streamed required tool call over two socket peers', async () => {
  const stream = await client.chat.completions.create({
    model: serving.modelId,
    messages: [{ role: 'user', content: 'Look it up.' }],
    tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { key: { enum: ['x', 'y'] } }, required: ['key'] } } }],
    tool_choice: 'required',
    stream: true,
    seed: 5,
    max_tokens: 512,
  });
  let args = '';
  let name: string | undefined;
  let finish: string | null = null;
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta.tool_calls?.[0];
    if (delta?.index === 0) {
      name ??= delta.function?.name;
      args += delta.function?.arguments ?? '';
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  expect(finish).toBe('tool_calls');
  expect(name).toBe('lookup');
  expect(['x', 'y']).toContain((JSON.parse(args) as { key: string }).key);
});
