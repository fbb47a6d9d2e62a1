/**
 * Structured outputs and tool calls through real clients on `/v1/chat/completions`: the grammar
 * alone makes random weights answer valid, schema-conforming JSON and tool calls. Registered
 * by structured-clients.test.ts on its shared head.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { generateObject, generateText, jsonSchema, streamText, tool } from 'ai';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { specFetch } from '../openapi/spec-fetch.ts';
import { petSchema, type QwenHead, weatherTool } from './qwen-head.ts';

export function chatClientTests(head: QwenHead): void {
  const user = [{ role: 'user' as const, content: 'Describe a pet.' }];

  describe('json_schema: a bounded schema from random weights', () => {
    it('50 seeds out of 50: valid JSON that Ajv accepts, finish_reason stop', async () => {
      const validate = new Ajv().compile(petSchema);
      // Eight requests in flight at a time: the head batches them, as it would for eight users (eight
      // workers take the next seed as each answer comes, so no batch waits for its slowest answer).
      const seeds = Array.from({ length: 50 }, (_, i) => i + 1);
      let next = 0;
      let checked = 0;
      await Promise.all(Array.from({ length: 8 }, async () => {
        for (let seed = seeds[next++]; seed !== undefined; seed = seeds[next++]) {
          const answer = await head.client.chat.completions.create({
            model: head.modelId,
            messages: user,
            seed,
            max_tokens: 1024,
            response_format: { type: 'json_schema', json_schema: { name: 'pet', schema: petSchema, strict: true } },
          });
          const choice = answer.choices[0];
          expect(choice.finish_reason, `seed ${seed}`).toBe('stop');
          const value: unknown = JSON.parse(choice.message.content ?? '');
          expect(validate(value), `seed ${seed}: ${choice.message.content} ${JSON.stringify(validate.errors)}`).toBe(true);
          checked++;
        }
      }));
      expect(checked).toBe(50);
    }, 600_000);

    it('json_object streams a JSON object', async () => {
      const stream = await head.client.chat.completions.create({ model: head.modelId, messages: user, seed: 3, max_tokens: 128, stream: true, response_format: { type: 'json_object' } });
      let text = '';
      let finish: string | null = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      if (finish === 'stop') expect(typeof JSON.parse(text)).toBe('object');
      else expect(text.startsWith('{')).toBe(true); // an unbounded object may run out of tokens
    });

    it('a schema the engine cannot compile is a 400 naming response_format', async () => {
      const error = await head.client.chat.completions
        .create({ model: head.modelId, messages: user, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', minLength: 9, maxLength: 2 } } } })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('response_format');
    });
  });

  describe('openai', () => {
    it('chat.completions.parse with a zod schema', async () => {
      const Pet = z.object({ name: z.string().max(12), kind: z.enum(['cat', 'dog']), legs: z.number().int().min(0).max(8), friends: z.array(z.string().max(6)).max(2) });
      const completion = await head.client.chat.completions.parse({ model: head.modelId, messages: user, seed: 7, max_tokens: 1024, response_format: zodResponseFormat(Pet, 'pet') });
      const parsed = completion.choices[0].message.parsed;
      expect(Pet.parse(parsed)).toEqual(parsed);
    });

    it('a two-step tool loop: a required call, the tool result, then a text answer', async () => {
      const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Oslo?' }];
      const first = await head.client.chat.completions.create({ model: head.modelId, messages, tools: [weatherTool], tool_choice: 'required', seed: 1, max_tokens: 512 });
      const message = first.choices[0].message;
      expect(first.choices[0].finish_reason).toBe('tool_calls');
      expect(message.tool_calls?.length).toBeGreaterThan(0);
      const call = message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
      expect(call.id).toMatch(/^call_/);
      expect(call.function.name).toBe('get_weather');
      const args = JSON.parse(call.function.arguments) as { city: string; unit: string };
      expect(['c', 'f']).toContain(args.unit);

      messages.push(message, { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 3 }) });
      const second = await head.client.chat.completions.create({ model: head.modelId, messages, tools: [weatherTool], tool_choice: 'none', seed: 2, max_tokens: 16 });
      expect(second.choices[0].message.tool_calls).toBeUndefined();
      expect(typeof second.choices[0].message.content).toBe('string');
      // The call and its result are in the prompt: longer than the question alone.
      const alone = await head.client.chat.completions.create({ model: head.modelId, messages: messages.slice(0, 1), tools: [weatherTool], tool_choice: 'none', max_tokens: 1 });
      expect(second.usage!.prompt_tokens).toBeGreaterThan(alone.usage!.prompt_tokens + 20);
    });

    it('streamed tool calls: index, id and name first, then arguments that add up to JSON', async () => {
      const stream = await head.client.chat.completions.create({
        model: head.modelId,
        messages: [{ role: 'user', content: 'Weather in Oslo and Rome?' }],
        tools: [weatherTool],
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        parallel_tool_calls: false,
        stream: true,
        seed: 4,
        max_tokens: 512,
      });
      const calls = new Map<number, { id?: string; name?: string; args: string }>();
      let finish: string | null = null;
      for await (const chunk of stream) {
        for (const delta of chunk.choices[0]?.delta.tool_calls ?? []) {
          const call = calls.get(delta.index) ?? { args: '' };
          if (delta.id) {
            expect(call.id).toBeUndefined();
            call.id = delta.id;
            call.name = delta.function?.name;
          }
          call.args += delta.function?.arguments ?? '';
          calls.set(delta.index, call);
        }
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      expect(finish).toBe('tool_calls');
      expect([...calls.keys()]).toEqual([0]); // parallel_tool_calls: false
      const only = calls.get(0)!;
      expect(only.name).toBe('get_weather');
      expect(only.id).toMatch(/^call_/);
      expect(Object.keys(JSON.parse(only.args) as object).sort()).toEqual(['city', 'unit']);
    });
  });

  describe('Vercel AI SDK (@ai-sdk/openai-compatible)', () => {
    const provider = () => createOpenAICompatible({ name: 'meshnet', baseURL: head.baseURL, supportsStructuredOutputs: true, fetch: specFetch });

    it('generateObject', async () => {
      const schema = z.object({ title: z.string().max(10), done: z.boolean(), priority: z.enum(['low', 'high']) });
      const { object, finishReason } = await generateObject({ model: provider()(head.modelId), schema, prompt: 'A task.', seed: 5, maxOutputTokens: 1024 });
      expect(finishReason).toBe('stop');
      expect(schema.parse(object)).toEqual(object);
    });

    it('generateText with a tool', async () => {
      const seen: unknown[] = [];
      const result = await generateText({
        model: provider()(head.modelId),
        prompt: 'Weather in Oslo?',
        seed: 6,
        maxOutputTokens: 512,
        toolChoice: 'required',
        tools: {
          get_weather: tool({
            description: 'Current weather in a city',
            inputSchema: jsonSchema<{ city: string; unit: 'c' | 'f' }>(weatherTool.function.parameters as never),
            execute: async (input) => {
              seen.push(input);
              return { temperature: 3 };
            },
          }),
        },
      });
      expect(result.finishReason).toBe('tool-calls');
      expect(result.toolCalls.length).toBeGreaterThan(0);
      expect(result.toolCalls[0].toolName).toBe('get_weather');
      expect(seen.length).toBe(result.toolCalls.length);
      expect(result.toolResults[0].output).toEqual({ temperature: 3 });
    });

    it('streamText', async () => {
      const result = streamText({ model: provider()(head.modelId), prompt: 'Say something.', seed: 8, maxOutputTokens: 12 });
      let text = '';
      for await (const part of result.textStream) text += part;
      expect(text).toBe(await result.text);
      expect(await result.finishReason).toBe('length');
    });
  });

  describe('LangChain (@langchain/openai)', () => {
    const chat = () => new ChatOpenAI({ model: head.modelId, apiKey: 'unused', configuration: { baseURL: head.baseURL, fetch: specFetch }, maxRetries: 0, maxTokens: 1024, modelKwargs: { seed: 9 } });

    it('withStructuredOutput', async () => {
      const schema = z.object({ city: z.string().max(10), rainy: z.boolean() });
      const structured = chat().withStructuredOutput(schema, { name: 'forecast', method: 'jsonSchema' });
      const value = await structured.invoke('Forecast?');
      expect(schema.parse(value)).toEqual(value);
    });

    it('bindTools', async () => {
      const bound = chat().bindTools([weatherTool], { tool_choice: 'required' });
      const message = await bound.invoke('Weather in Oslo?');
      expect(message.tool_calls?.length).toBeGreaterThan(0);
      expect(message.tool_calls![0].name).toBe('get_weather');
      expect(['c', 'f']).toContain((message.tool_calls![0].args as { unit: string }).unit);
    });
  });
}
