/**
 * Function tools and structured output on `POST /v1/responses` through real clients: the
 * `openai` SDK (a two-step tool loop equal to chat completions on the same conversation, a
 * streamed call, `text.format` json_schema and `responses.parse`), the Vercel AI SDK through
 * `@ai-sdk/openai`'s default Responses path, and LangChain with `useResponsesApi`. Registered
 * by structured-clients.test.ts on its shared head.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { generateObject, generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { specFetch } from '../openapi/spec-fetch.ts';
import { petSchema, type QwenHead, weatherFunction, weatherParameters, weatherTool } from './qwen-head.ts';

type Created = OpenAI.Responses.ResponseCreateParamsNonStreaming;
type Streamed = OpenAI.Responses.ResponseCreateParamsStreaming;
type Call = OpenAI.Responses.ResponseFunctionToolCall;

const isCall = (item: OpenAI.Responses.ResponseOutputItem): item is Call => item.type === 'function_call';

export function responsesClientTests(head: QwenHead): void {
  const validArguments = new Ajv().compile(weatherParameters);

  describe('openai: responses.create with function tools', () => {
    it('a two-step tool loop (call → function_call_output → answer) equals chat completions on the same conversation', async () => {
      const question = 'Weather in Oslo?';
      // `seed` is an extension (as on chat); the same seed and prompt give the same tokens.
      const first = await head.client.responses.create({ model: head.modelId, input: question, tools: [weatherFunction], tool_choice: 'required', max_output_tokens: 512, seed: 1 } as Created);
      expect(first.status).toBe('completed');
      expect(first.output.length).toBeGreaterThan(0);
      expect(first.output.every(isCall)).toBe(true); // required: calls only
      const calls = first.output.filter(isCall);
      for (const call of calls) {
        expect(call).toMatchObject({ type: 'function_call', status: 'completed', name: 'get_weather' });
        expect(call.id).toMatch(/^fc_/);
        expect(call.call_id).toMatch(/^call_/);
        expect(validArguments(JSON.parse(call.arguments)), call.arguments).toBe(true);
      }
      expect(first).toMatchObject({ tool_choice: 'required', tools: [{ type: 'function', name: 'get_weather', strict: true }] });
      const viaChat = await head.client.chat.completions.create({ model: head.modelId, messages: [{ role: 'user', content: question }], tools: [weatherTool], tool_choice: 'required', max_tokens: 512, seed: 1 });
      const chatCalls = (viaChat.choices[0].message.tool_calls ?? []) as OpenAI.Chat.ChatCompletionMessageFunctionToolCall[];
      expect(calls.map((c) => [c.name, c.arguments])).toEqual(chatCalls.map((c) => [c.function.name, c.function.arguments]));

      const results = calls.map((call) => ({ type: 'function_call_output' as const, call_id: call.call_id, output: JSON.stringify({ temperature: 3 }) }));
      const second = await head.client.responses.create({
        model: head.modelId,
        input: [{ role: 'user', content: question }, ...first.output, ...results] as OpenAI.Responses.ResponseInput,
        tools: [weatherFunction],
        tool_choice: 'none',
        max_output_tokens: 16,
        seed: 2,
      } as Created);
      expect(second.output.map((item) => item.type)).toEqual(['message']);
      const chatSecond = await head.client.chat.completions.create({
        model: head.modelId,
        messages: [
          { role: 'user', content: question },
          { role: 'assistant', content: null, tool_calls: calls.map((c) => ({ id: c.call_id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })) },
          ...results.map((r) => ({ role: 'tool' as const, tool_call_id: r.call_id, content: r.output })),
        ],
        tools: [weatherTool],
        tool_choice: 'none',
        max_tokens: 16,
        seed: 2,
      });
      // The same history through the template: the same prompt, the same answer.
      expect(second.usage!.input_tokens).toBe(chatSecond.usage!.prompt_tokens);
      expect(second.output_text).toBe(chatSecond.choices[0].message.content);
    });

    it('streamed: a named function with parallel_tool_calls false is one function_call item whose deltas add up', async () => {
      const stream = await head.client.responses.create({
        model: head.modelId,
        input: 'Weather in Oslo and Rome?',
        tools: [weatherFunction],
        tool_choice: { type: 'function', name: 'get_weather' },
        parallel_tool_calls: false,
        stream: true,
        max_output_tokens: 512,
        seed: 4,
      } as Streamed);
      const events: OpenAI.Responses.ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      const types = events.map((e) => e.type);
      expect(types.slice(0, 3)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added']);
      expect(types.slice(-3)).toEqual(['response.function_call_arguments.done', 'response.output_item.done', 'response.completed']);
      expect(new Set(types.slice(3, -3))).toEqual(new Set(['response.function_call_arguments.delta']));
      const added = events[2] as OpenAI.Responses.ResponseOutputItemAddedEvent;
      expect(added.item).toMatchObject({ type: 'function_call', status: 'in_progress', name: 'get_weather', arguments: '' });
      const deltas = events.filter((e): e is OpenAI.Responses.ResponseFunctionCallArgumentsDeltaEvent => e.type === 'response.function_call_arguments.delta');
      const done = events.at(-3) as OpenAI.Responses.ResponseFunctionCallArgumentsDoneEvent;
      expect(deltas.every((d) => d.item_id === added.item.id && d.output_index === 0)).toBe(true);
      expect(deltas.map((d) => d.delta).join('')).toBe(done.arguments);
      expect(Object.keys(JSON.parse(done.arguments) as object).sort()).toEqual(['city', 'unit']);
      const completed = (events.at(-1) as OpenAI.Responses.ResponseCompletedEvent).response;
      expect(completed.output).toEqual([{ ...added.item, status: 'completed', arguments: done.arguments }]);
      expect(completed).toMatchObject({ parallel_tool_calls: false, tool_choice: { type: 'function', name: 'get_weather' } });
    });
  });

  describe('openai: text.format', () => {
    it('json_schema (strict), streamed: the bounded schema gives Ajv-valid JSON and completed', async () => {
      const validate = new Ajv().compile(petSchema);
      const stream = await head.client.responses.create({
        model: head.modelId,
        input: 'Describe a pet.',
        text: { format: { type: 'json_schema', name: 'pet', schema: petSchema as never, strict: true } },
        max_output_tokens: 1024,
        stream: true,
        seed: 11,
      } as Streamed);
      let text = '';
      let final: OpenAI.Responses.Response | undefined;
      for await (const event of stream) {
        if (event.type === 'response.output_text.delta') text += event.delta;
        if (event.type === 'response.completed' || event.type === 'response.incomplete') final = event.response;
      }
      expect(final?.status).toBe('completed');
      expect(final?.output_text ?? text).toBe(text);
      expect(validate(JSON.parse(text)), text).toBe(true);
      expect(final?.text?.format).toMatchObject({ type: 'json_schema', name: 'pet', strict: true });
    });

    it('responses.parse with a zod text format', async () => {
      const Pet = z.object({ name: z.string().max(12), kind: z.enum(['cat', 'dog']), legs: z.number().int().min(0).max(8) });
      const response = await head.client.responses.parse({ model: head.modelId, input: 'Describe a pet.', text: { format: zodTextFormat(Pet, 'pet') }, max_output_tokens: 1024, seed: 7 } as never);
      const parsed = (response as { output_parsed: unknown }).output_parsed;
      expect(Pet.parse(parsed)).toEqual(parsed);
    });

    it('a schema the engine cannot compile is a 400 naming text.format', async () => {
      const error = await head.client.responses
        .create({ model: head.modelId, input: 'x', text: { format: { type: 'json_schema', name: 'x', schema: { type: 'string', minLength: 9, maxLength: 2 } } } })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error).toMatchObject({ param: 'text.format', code: 'invalid_schema' });
    });
  });

  describe('Vercel AI SDK (@ai-sdk/openai, the default Responses path)', () => {
    const provider = () => createOpenAI({ baseURL: head.baseURL, apiKey: 'unused', fetch: specFetch });

    it('generateText with a tool: the call, its result, then a text answer', async () => {
      const seen: unknown[] = [];
      const bodies: unknown[] = [];
      const result = await generateText({
        model: createOpenAI({
          baseURL: head.baseURL,
          apiKey: 'unused',
          fetch: async (url, init) => {
            bodies.push(JSON.parse(String(init?.body)));
            return specFetch(url, init);
          },
        })(head.modelId),
        prompt: 'Weather in Oslo?',
        // The Responses path sends no seed (the SDK warns it is unsupported): greedy keeps it deterministic.
        temperature: 0,
        maxOutputTokens: 256,
        toolChoice: 'required',
        providerOptions: { openai: { parallelToolCalls: false } },
        stopWhen: stepCountIs(2),
        prepareStep: ({ stepNumber }) => (stepNumber === 0 ? {} : { toolChoice: 'none' }),
        tools: {
          get_weather: tool({
            description: 'Current weather in a city',
            inputSchema: jsonSchema<{ city: string; unit: 'c' | 'f' }>(weatherParameters as never),
            execute: async (input) => {
              seen.push(input);
              return { temperature: 3 };
            },
          }),
        },
      });
      expect(result.steps).toHaveLength(2);
      const [call, answer] = result.steps;
      expect(call.finishReason).toBe('tool-calls');
      expect(call.toolCalls).toHaveLength(1); // parallelToolCalls: false
      expect(call.toolCalls[0].toolName).toBe('get_weather');
      expect(seen.length).toBe(call.toolCalls.length);
      expect(call.toolResults[0].output).toEqual({ temperature: 3 });
      expect(answer.toolCalls).toHaveLength(0);
      expect(typeof answer.text).toBe('string');
      // The second request carried the call and its output as Responses items.
      const input = (bodies[1] as { input: { type?: string; call_id?: string }[] }).input;
      expect(input.filter((item) => item.type === 'function_call').map((item) => item.call_id)).toEqual(call.toolCalls.map((c) => c.toolCallId));
      expect(input.filter((item) => item.type === 'function_call_output').map((item) => item.call_id)).toEqual(call.toolCalls.map((c) => c.toolCallId));
    });

    it('generateObject', async () => {
      const schema = z.object({ title: z.string().max(10), done: z.boolean(), priority: z.enum(['low', 'high']) });
      const { object, finishReason } = await generateObject({ model: provider()(head.modelId), schema, prompt: 'A task.', temperature: 0, maxOutputTokens: 1024 });
      expect(finishReason).toBe('stop');
      expect(schema.parse(object)).toEqual(object);
    });
  });

  describe('LangChain (@langchain/openai, useResponsesApi)', () => {
    const chat = () =>
      new ChatOpenAI({ model: head.modelId, apiKey: 'unused', useResponsesApi: true, configuration: { baseURL: head.baseURL, fetch: specFetch }, maxRetries: 0, maxTokens: 1024, modelKwargs: { seed: 9 } });

    it('withStructuredOutput', async () => {
      const schema = z.object({ city: z.string().max(10), rainy: z.boolean() });
      const value = await chat().withStructuredOutput(schema, { name: 'forecast', method: 'jsonSchema' }).invoke('Forecast?');
      expect(schema.parse(value)).toEqual(value);
    });

    it('bindTools (a named tool_choice: 1.5.8 drops string choices such as required on this path)', async () => {
      const message = await chat().bindTools([weatherTool], { tool_choice: 'get_weather' }).invoke('Weather in Oslo?');
      expect(message.tool_calls?.length).toBeGreaterThan(0);
      expect(message.tool_calls![0].name).toBe('get_weather');
      expect(['c', 'f']).toContain((message.tool_calls![0].args as { unit: string }).unit);
    });
  });
}
