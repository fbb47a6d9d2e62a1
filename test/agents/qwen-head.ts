/**
 * One head for the agents client tests: a random-weight Qwen2 model with the real
 * Qwen2.5-Instruct tokenizer and template (test/fixtures/qwen-chat-model.ts), every layer in
 * the head process. `useQwenHead()` starts it in `beforeAll` and closes it in `afterAll` of the
 * calling test file; the case modules (chat-clients.ts, responses-clients.ts) share it, so the
 * model is written once and grammars compiled for one endpoint are cached for the other.
 * Every client it hands out validates bodies and stream chunks against the OpenAI spec
 * (`specFetch`).
 */
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { serveStories } from '../api/api-harness.ts';
import { tempDir } from '../engine/harness.ts';
import { writeQwenChatModel } from '../fixtures/qwen-chat-model.ts';
import { specFetch } from '../openapi/spec-fetch.ts';

export interface QwenHead {
  /** `http://127.0.0.1:PORT/v1` */
  readonly baseURL: string;
  readonly modelId: string;
  readonly client: OpenAI;
  readonly serving: ServingHead;
}

/** Registers the head's start and close; read the fields inside tests (they exist from `beforeAll` on). */
export function useQwenHead(): QwenHead {
  let home: { dir: string; remove: () => Promise<void> } | undefined;
  let model: { dir: string; remove: () => Promise<void> } | undefined;
  let state: QwenHead | undefined;
  beforeAll(async () => {
    home = await tempDir('agents');
    process.env.MESHNET_HOME = path.join(home.dir, 'home');
    model = await writeQwenChatModel();
    const serving = await serveStories({ model: model.dir });
    const baseURL = `${serving.head.url}v1`;
    state = { baseURL, modelId: serving.modelId, serving, client: new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 120_000, fetch: specFetch }) };
  });
  afterAll(async () => {
    await state?.serving.close();
    await model?.remove();
    await home?.remove();
  });
  const get = (): QwenHead => {
    if (!state) throw new Error('the Qwen head is not started yet (read it inside a test)');
    return state;
  };
  return {
    get baseURL() {
      return get().baseURL;
    },
    get modelId() {
      return get().modelId;
    },
    get client() {
      return get().client;
    },
    get serving() {
      return get().serving;
    },
  };
}

/** Bounded: nested objects, arrays with maxItems, strings with maxLength, enums, required. */
export const petSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 8 },
    species: { enum: ['cat', 'dog', 'owl', 'newt'] },
    age: { type: 'integer', minimum: 0, maximum: 30 },
    toys: { type: 'array', items: { type: 'string', maxLength: 5 }, maxItems: 2 },
    owner: {
      type: 'object',
      properties: { first: { type: 'string', maxLength: 6 }, verified: { type: 'boolean' }, tier: { enum: ['gold', 'plain'] } },
      required: ['first', 'verified', 'tier'],
      additionalProperties: false,
    },
  },
  required: ['name', 'species', 'age', 'toys', 'owner'],
  additionalProperties: false,
} as const;

/** The arguments of `get_weather`. */
export const weatherParameters = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
} as const;

/** `get_weather` as chat completions takes it. */
export const weatherTool = {
  type: 'function' as const,
  function: { name: 'get_weather', description: 'Current weather in a city', parameters: weatherParameters },
};

/** `get_weather` as the Responses API takes it (flat). */
export const weatherFunction = { type: 'function' as const, name: 'get_weather', description: 'Current weather in a city', parameters: weatherParameters, strict: true };
