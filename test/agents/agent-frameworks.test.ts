/**
 * Agent frameworks as a new user points them at meshnet (issue 26): the OpenAI Agents SDK
 * (`@openai/agents`) with its default Responses model and with its Chat Completions model — a
 * plain agent on the demo (whose answers end by themselves, so the run completes), a tool loop (a required call whose result ends the run) and a structured output, on the Qwen fixture — and
 * LlamaIndex (`@llamaindex/openai`): chat and a stream on the demo (whose answers end by
 * themselves), a tool call on the Qwen fixture (the demo's 128 positions cannot hold tools). Every body and stream chunk is checked against the
 * OpenAI spec (`specFetch`).
 */
import path from 'node:path';
import { Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, run, setTracingDisabled, tool, type Model } from '@openai/agents';
import { OpenAI as LlamaOpenAI } from '@llamaindex/openai';
import { tool as llamaTool } from 'llamaindex';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { serveHead, type ServingHead } from '../../src/node/serve/serve-head.ts';
import { tempDir } from '../engine/harness.ts';
import { specFetch } from '../openapi/spec-fetch.ts';
import { useQwenHead } from './qwen-head.ts';

setTracingDisabled(true); // the SDK would export traces to api.openai.com

const qwen = useQwenHead();
let home: { dir: string; remove: () => Promise<void> };
let demo: ServingHead;
let demoClient: OpenAI;
const demoURL = () => `${demo.head.url}v1`;

beforeAll(async () => {
  home = await tempDir('agent-frameworks');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  demo = await serveHead({ model: 'demo', port: 0, host: '127.0.0.1', localPeers: 0, link: 'relay', headLayers: 'auto', maxSessions: 4, device: 'cpu', dtype: 'fp32', threads: 1, log: () => {} });
  demoClient = new OpenAI({ baseURL: demoURL(), apiKey: 'unused', maxRetries: 0, timeout: 60_000, fetch: specFetch });
}, 90_000);

afterAll(async () => {
  await demo?.close();
  await home?.remove();
});

// `as never`: the SDK types its client against its own copy of the openai package.
const models: [string, (client: OpenAI, id: string) => Model][] = [
  ['Responses model (the default)', (client, id) => new OpenAIResponsesModel(client as never, id)],
  ['Chat Completions model', (client, id) => new OpenAIChatCompletionsModel(client as never, id)],
];

describe('OpenAI Agents SDK', () => {
  for (const [label, model] of models) {
    it(`${label}: a plain agent on the demo completes (its answer ends by itself: completed, not incomplete)`, async () => {
      const agent = new Agent({ name: 'dreamer', instructions: 'Be brief.', model: model(demoClient, 'demo'), modelSettings: { temperature: 0 } });
      const result = await run(agent, 'Hello!');
      expect(typeof result.finalOutput).toBe('string');
      expect((result.finalOutput as string).endsWith('.')).toBe(true);
      expect(result.newItems.map((item) => item.type)).toEqual(['message_output_item']);
    });
  }

  for (const [label, model] of models) {
    it(`${label}: a tool loop — a required call, the tool runs, its result ends the run`, async () => {
      const cities: string[] = [];
      const weather = tool({
        name: 'get_weather',
        description: 'Current weather in a city',
        parameters: z.object({ city: z.string().max(12) }),
        execute: async ({ city }) => {
          cities.push(city);
          return 'cold and clear';
        },
      });
      const client = new OpenAI({ baseURL: qwen.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 120_000, fetch: specFetch });
      const agent = new Agent({ name: 'weather', instructions: 'Answer briefly.', model: model(client, qwen.modelId), tools: [weather], toolUseBehavior: 'stop_on_first_tool', modelSettings: { toolChoice: 'required', parallelToolCalls: false, temperature: 0, maxTokens: 512 } });
      const result = await run(agent, 'Weather in Oslo?', { maxTurns: 2 });
      expect(cities).toHaveLength(1);
      expect(cities.every((city) => typeof city === 'string' && city.length <= 12)).toBe(true);
      expect(result.finalOutput).toBe('cold and clear');
      const items = result.newItems.map((item) => item.type);
      expect(items).toEqual(['tool_call_item', 'tool_call_output_item']);
    });

    it(`${label}: a structured output (zod outputType) on the Qwen fixture`, async () => {
      const Forecast = z.object({ city: z.string().max(10), rainy: z.boolean(), level: z.enum(['low', 'high']) });
      const client = new OpenAI({ baseURL: qwen.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 120_000, fetch: specFetch });
      const agent = new Agent({ name: 'forecaster', instructions: 'Give a forecast.', model: model(client, qwen.modelId), outputType: Forecast, modelSettings: { maxTokens: 512 } });
      const result = await run(agent, 'Forecast for Oslo?');
      expect(Forecast.parse(result.finalOutput)).toEqual(result.finalOutput);
    });
  }
});

describe('LlamaIndex (@llamaindex/openai)', () => {
  const llm = (on: 'demo' | 'qwen' = 'demo') =>
    new LlamaOpenAI({ model: on === 'demo' ? 'demo' : qwen.modelId, apiKey: 'unused', baseURL: on === 'demo' ? demoURL() : qwen.baseURL, maxRetries: 0, temperature: 0, ...(on === 'demo' ? {} : { maxTokens: 512 }), additionalSessionOptions: { fetch: specFetch } });

  it('chat: the demo answers and ends by itself', async () => {
    const response = await llm().chat({ messages: [{ role: 'user', content: 'Hello!' }] });
    expect(response.message.role).toBe('assistant');
    expect(response.message.content).toBe('As I settle, fragments of vectors aligning like a kaleidoscope.');
  });

  it('a stream whose deltas add up to the same answer', async () => {
    const stream = await llm().chat({ messages: [{ role: 'user', content: 'Hello!' }], stream: true });
    let text = '';
    let chunks = 0;
    for await (const chunk of stream) {
      text += chunk.delta;
      chunks++;
    }
    expect(chunks).toBeGreaterThan(3);
    expect(text).toBe('As I settle, fragments of vectors aligning like a kaleidoscope.');
  });

  it('a tool call (tool_choice required): the call and its JSON arguments', async () => {
    const weather = llamaTool({ name: 'get_weather', description: 'Current weather in a city', parameters: z.object({ city: z.string().max(12) }), execute: ({ city }) => `cold in ${city}` });
    const response = await llm('qwen').chat({ messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools: [weather], additionalChatOptions: { tool_choice: 'required' } });
    const calls = (response.message.options as { toolCall?: { id: string; name: string; input: unknown }[] }).toolCall ?? [];
    expect(calls.length).toBeGreaterThan(0);
    expect(calls[0].name).toBe('get_weather');
    expect(calls[0].id).toMatch(/^call_/);
    const input = typeof calls[0].input === 'string' ? JSON.parse(calls[0].input) : calls[0].input;
    expect(typeof (input as { city: unknown }).city).toBe('string');
  });
});
