/**
 * The rough edges of tool calls that agent frameworks hit, through the `openai` client on
 * chat completions and the Responses API, streamed and not (issue 26): a call cut by
 * `max_tokens` is a call with the arguments written so far (or, before its name is complete,
 * no call), never template text in `content` or `output_text`; loose `parameters` schemas give
 * object arguments without invented keys; a `tool` message with no earlier `tool_calls` is a
 * 400. Registered by structured-clients.test.ts on its shared head.
 */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { type QwenHead, weatherFunction, weatherTool } from './qwen-head.ts';

interface Cut {
  readonly content: string;
  readonly calls: { name: string; arguments: string }[];
}

const question = [{ role: 'user' as const, content: 'Weather in Oslo, Rome and Lima?' }];

async function chatCut(head: QwenHead, maxTokens: number, seed: number, stream: boolean): Promise<Cut> {
  const body = { model: head.modelId, messages: question, tools: [weatherTool], tool_choice: 'required' as const, seed, max_tokens: maxTokens };
  if (!stream) {
    const message = (await head.client.chat.completions.create(body)).choices[0].message;
    const calls = (message.tool_calls ?? []) as OpenAI.Chat.ChatCompletionMessageFunctionToolCall[];
    return { content: message.content ?? '', calls: calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments })) };
  }
  let content = '';
  const calls: { name: string; arguments: string }[] = [];
  for await (const chunk of await head.client.chat.completions.create({ ...body, stream: true })) {
    content += chunk.choices[0]?.delta.content ?? '';
    for (const delta of chunk.choices[0]?.delta.tool_calls ?? []) {
      calls[delta.index] ??= { name: delta.function?.name ?? '', arguments: '' };
      calls[delta.index].arguments += delta.function?.arguments ?? '';
    }
  }
  return { content, calls };
}

async function responsesCut(head: QwenHead, maxTokens: number, seed: number, stream: boolean): Promise<Cut> {
  const body = { model: head.modelId, input: question, tools: [weatherFunction], tool_choice: 'required' as const, seed, max_output_tokens: maxTokens };
  let response: OpenAI.Responses.Response | undefined;
  let streamedText = '';
  if (!stream) response = await head.client.responses.create(body as OpenAI.Responses.ResponseCreateParamsNonStreaming);
  else {
    for await (const event of await head.client.responses.create({ ...body, stream: true } as OpenAI.Responses.ResponseCreateParamsStreaming)) {
      if (event.type === 'response.output_text.delta') streamedText += event.delta;
      if (event.type === 'response.completed' || event.type === 'response.incomplete') response = event.response;
    }
  }
  const calls = response!.output.filter((item): item is OpenAI.Responses.ResponseFunctionToolCall => item.type === 'function_call');
  // Nothing but calls; an answer cut before any call is complete is one empty message (no output_text).
  const messages = response!.output.filter((item) => item.type === 'message');
  expect(messages.length === 0 || (messages.length === 1 && calls.length === 0)).toBe(true);
  return { content: (response!.output_text ?? '') + streamedText, calls: calls.map((c) => ({ name: c.name, arguments: c.arguments })) };
}

export function toolEdgeTests(head: QwenHead): void {
  describe('a tool call cut by max_tokens (tool_choice required, parallel calls)', () => {
    it('chat and Responses, streamed and not: calls with their arguments so far, never template text', async () => {
      // The whole answer first (with its tokens' texts), to cut it inside its first call's
      // opening, inside the name, inside the arguments, and inside a second call's opening.
      let seed = 0;
      let whole: OpenAI.Chat.ChatCompletion | undefined;
      for (seed = 1; seed <= 12; seed++) {
        whole = await head.client.chat.completions.create({ model: head.modelId, messages: question, tools: [weatherTool], tool_choice: 'required', seed, max_tokens: 400, logprobs: true });
        if ((whole.choices[0].message.tool_calls?.length ?? 0) >= 2) break;
      }
      const full = (whole!.choices[0].message.tool_calls ?? []) as OpenAI.Chat.ChatCompletionMessageFunctionToolCall[];
      expect(full.length, 'a seed with two or more calls').toBeGreaterThanOrEqual(2);
      const tokens = whole!.choices[0].logprobs!.content!.map((t) => t.token);
      const upTo = (k: number) => tokens.slice(0, k).join('');
      const at = (pred: (text: string) => boolean) => tokens.findIndex((_, i) => pred(upTo(i + 1))) + 1;
      const cuts = new Set([
        1,
        at((t) => t.includes('"name": "g')),
        at((t) => t.includes('"arguments": {')),
        at((t) => t.split('<tool_call>').length === 3) - 1, // just before the second call's marker ends
        at((t) => t.split('<tool_call>').length === 3),
      ]);
      for (const cut of cuts) {
        expect(cut).toBeGreaterThan(0);
        for (const [endpoint, run] of [
          ['chat', chatCut],
          ['responses', responsesCut],
        ] as const) {
          for (const stream of [false, true]) {
            const got = await run(head, cut, seed, stream);
            const where = `${endpoint} stream=${stream} max_tokens=${cut}: ${JSON.stringify(got)} of ${JSON.stringify(upTo(cut))}`;
            expect(got.content, where).toBe('');
            const named = upTo(cut).split('<tool_call>').filter((part) => /"name": "get_weather"/.test(part)).length;
            expect(got.calls.length, where).toBe(named);
            got.calls.forEach((call, i) => {
              expect(call.name, where).toBe('get_weather');
              expect(full[i].function.arguments.startsWith(call.arguments), where).toBe(true);
            });
          }
        }
      }
    }, 300_000);
  });

  describe('loose parameter schemas, as OpenAI treats them', () => {
    for (const [label, parameters] of [
      ['no parameters', undefined],
      ['parameters {}', {}],
      ['parameters {"type": "object"}', { type: 'object' }],
    ] as const) {
      it(`${label}: the arguments are {} (chat and Responses)`, async () => {
        const fn = { name: 'ping', description: 'Ping the server', ...(parameters === undefined ? {} : { parameters }) };
        for (const seed of [1, 2, 3]) {
          const chat = await head.client.chat.completions.create({ model: head.modelId, messages: [{ role: 'user', content: 'Ping' }], tools: [{ type: 'function', function: fn }], tool_choice: 'required', seed, max_tokens: 200 });
          const calls = chat.choices[0].message.tool_calls as OpenAI.Chat.ChatCompletionMessageFunctionToolCall[];
          expect(chat.choices[0].finish_reason).toBe('tool_calls');
          for (const call of calls) expect(JSON.parse(call.function.arguments)).toEqual({});
          const responses = await head.client.responses.create({ model: head.modelId, input: 'Ping', tools: [{ type: 'function', strict: false, parameters: null, ...fn } as never], tool_choice: 'required', seed, max_output_tokens: 200 } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
          expect(responses.status).toBe('completed');
          for (const item of responses.output) expect(item.type === 'function_call' && JSON.parse(item.arguments)).toEqual({});
        }
      });
    }

    it('parameters of another type are a 400 naming them', async () => {
      const error = await head.client.chat.completions
        .create({ model: head.modelId, messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string' } } }] })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error).toMatchObject({ param: 'tools[0].function.parameters', code: 'invalid_function_parameters' });
    });
  });

  it('a tool message with no earlier tool_calls is a 400 (OpenAI: invalid_request_error naming the role)', async () => {
    const error = await head.client.chat.completions
      .create({ model: head.modelId, messages: [{ role: 'user', content: 'x' }, { role: 'tool', tool_call_id: 'call_1', content: '3' }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ status: 400, param: 'messages[1].role', type: 'invalid_request_error' });
    expect((error as Error).message).toContain("messages with role 'tool' must be a response to a preceeding message with 'tool_calls'");
  });
}
