/**
 * Ollama's API through the real `ollama` npm client, on the random-weight Qwen2 model with the
 * real Qwen2.5-Instruct template (tools and JSON through the grammar): every answer must equal
 * what the OpenAI routes give for the same request (one core entry), streams must equal whole
 * answers, schemas must hold, tool calls must carry object arguments, and refusals must come
 * back in Ollama's `{ "error": "…" }` shape. Registered by structured-clients.test.ts on its
 * shared head.
 */
import { Ajv } from 'ajv';
import { type ChatRequest, Ollama, type Tool } from 'ollama';
import { describe, expect, it } from 'vitest';
import { type QwenHead, weatherTool } from './qwen-head.ts';

/** The weather tool as Ollama's types spell it (mutable arrays). */
const weather = JSON.parse(JSON.stringify(weatherTool)) as Tool;
const user = [{ role: 'user', content: 'Describe a pet.' }];
/** Small and bounded, so random weights finish it in few tokens (the chat tests cover a deep schema). */
const petSchema = {
  type: 'object',
  properties: { species: { enum: ['cat', 'dog', 'owl'] }, age: { type: 'integer', minimum: 0, maximum: 30 }, name: { type: 'string', maxLength: 6 } },
  required: ['species', 'age', 'name'],
  additionalProperties: false,
};

export function ollamaClientTests(head: QwenHead): void {
  const ollama = () => new Ollama({ host: head.serving.head.url.replace(/\/$/, '') });

  describe('ollama client: models', () => {
    it('list, show, ps and version describe the served model', async () => {
      const client = ollama();
      const { models } = await client.list();
      expect(models).toHaveLength(1);
      expect(models[0].name).toBe(`${head.modelId}:latest`);
      expect(models[0].details.family).toBe('qwen2');
      expect(models[0].details.format).toBe('safetensors');
      expect(models[0].size).toBeGreaterThan(1_000_000);
      const shown = await client.show({ model: models[0].name });
      expect(shown.capabilities).toEqual(['completion', 'tools']);
      expect(shown.template).toContain('<tool_call>');
      const info = shown.model_info as unknown as Record<string, unknown>;
      expect(info['qwen2.block_count']).toBe(2);
      expect(info['qwen2.context_length']).toBe(4096);
      expect(info['general.parameter_count']).toBeGreaterThan(151_936 * 32);
      const ps = await client.ps();
      expect(ps.models.map((m) => m.name)).toEqual([`${head.modelId}:latest`]);
      expect(new Date(ps.models[0].expires_at).getTime()).toBeGreaterThan(Date.now());
      expect((await client.version()).version).toMatch(/^\d+\.\d+\.\d+$/);
    });

    it('an unknown model is a 404 in Ollama\'s shape', async () => {
      const error = await ollama().show({ model: 'llama3' }).catch((e: unknown) => e);
      expect(error).toMatchObject({ name: 'ResponseError', status_code: 404 });
      expect((error as Error).message).toContain("model 'llama3' not found");
      const raw = await fetch(`${head.serving.head.url}api/chat`, { method: 'POST', body: JSON.stringify({ model: head.modelId, messages: 'hi' }) });
      expect(raw.status).toBe(400);
      expect(await raw.json()).toEqual({ error: expect.stringContaining("'messages'") });
    });
  });

  describe('ollama client: chat and generate', () => {
    const options = { seed: 7, temperature: 0.9, top_k: 40, top_p: 0.95, num_predict: 12 };

    it('chat equals chat completions with the same sampling; the stream equals the whole answer', async () => {
      const whole = await ollama().chat({ model: head.modelId, messages: user, options });
      const openai = await head.client.chat.completions.create({ model: head.modelId, messages: user as never, seed: 7, temperature: 0.9, top_k: 40, top_p: 0.95, max_tokens: 12 } as never);
      expect(whole.message.content).toBe(openai.choices[0].message.content);
      expect(whole.done).toBe(true);
      expect(whole.done_reason).toBe(openai.choices[0].finish_reason);
      expect(whole.eval_count).toBe(openai.usage?.completion_tokens);
      expect(whole.prompt_eval_count).toBe(openai.usage?.prompt_tokens);
      expect(whole.total_duration).toBeGreaterThan(0);
      expect(whole.total_duration).toBeGreaterThanOrEqual(whole.prompt_eval_duration + whole.eval_duration - 1);

      let text = '';
      let last: { done: boolean; done_reason?: string; eval_count?: number } | undefined;
      let chunks = 0;
      for await (const chunk of await ollama().chat({ model: head.modelId, messages: user, options, stream: true })) {
        text += chunk.message.content;
        last = chunk;
        chunks++;
      }
      expect(chunks).toBeGreaterThan(2);
      expect(text).toBe(whole.message.content);
      expect(last).toMatchObject({ done: true, done_reason: whole.done_reason, eval_count: whole.eval_count });
    });

    it('a stream is NDJSON (application/x-ndjson); stream is on by default, as in Ollama', async () => {
      const response = await fetch(`${head.serving.head.url}api/chat`, { method: 'POST', body: JSON.stringify({ model: `${head.modelId}:latest`, messages: user, options: { num_predict: 3, seed: 1 } }) });
      expect(response.headers.get('content-type')).toBe('application/x-ndjson');
      const lines = (await response.text()).trim().split('\n').map((line) => JSON.parse(line) as { done: boolean });
      expect(lines.at(-1)?.done).toBe(true);
      expect(lines.slice(0, -1).every((l) => !l.done)).toBe(true);
    });

    it('generate renders the prompt as a user turn (with system); raw: true is the completions prompt', async () => {
      const generated = await ollama().generate({ model: head.modelId, prompt: 'Describe a pet.', system: 'Be brief.', options });
      const chat = await ollama().chat({ model: head.modelId, messages: [{ role: 'system', content: 'Be brief.' }, ...user], options });
      expect(generated.response).toBe(chat.message.content);
      const raw = await ollama().generate({ model: head.modelId, prompt: 'Once upon a time', raw: true, options });
      const completion = await head.client.completions.create({ model: head.modelId, prompt: 'Once upon a time', seed: 7, temperature: 0.9, top_p: 0.95, max_tokens: 12, top_k: 40 } as never);
      expect(raw.response).toBe(completion.choices[0].text);
      let streamed = '';
      for await (const chunk of await ollama().generate({ model: head.modelId, prompt: 'Once upon a time', raw: true, options, stream: true })) streamed += chunk.response;
      expect(streamed).toBe(raw.response);
      const load = await ollama().generate({ model: head.modelId, prompt: '' });
      expect(load).toMatchObject({ done: true, done_reason: 'load', response: '' });
      expect(await ollama().chat({ model: head.modelId, messages: [] })).toMatchObject({ done: true, done_reason: 'load', message: { role: 'assistant', content: '' } });
    });

    it('options.stop ends the answer; unknown or unsupported options are refused', async () => {
      const free = await ollama().chat({ model: head.modelId, messages: user, options: { seed: 3, num_predict: 24 } });
      const cut = free.message.content.slice(4, 6);
      expect(cut).toHaveLength(2);
      const stopped = await ollama().chat({ model: head.modelId, messages: user, options: { seed: 3, num_predict: 24, stop: [cut] } });
      expect(free.message.content.startsWith(stopped.message.content)).toBe(true);
      expect(stopped.message.content).not.toContain(cut);
      expect(stopped.done_reason).toBe('stop');
      for (const [bad, words] of [[{ mirostat: 2 }, 'mirostat'], [{ repeat_last_n: 64 }, 'repeat_last_n'], [{ warp: 1 }, 'options.warp'], [{ temperature: 'hot' }, 'options.temperature']] as const) {
        const error = await ollama().chat({ model: head.modelId, messages: user, options: bad as never }).catch((e: unknown) => e);
        expect(error, JSON.stringify(bad)).toMatchObject({ status_code: 400 });
        expect((error as Error).message).toContain(words);
      }
      const thinking = await ollama().chat({ model: head.modelId, messages: user, think: true }).catch((e: unknown) => e);
      expect((thinking as Error).message).toContain('does not support thinking');
    });
  });

  describe('ollama client: format and tools (the grammar path)', () => {
    it('format as a JSON schema: 3 seeds give JSON that Ajv accepts; "json" gives an object', async () => {
      const validate = new Ajv().compile(petSchema);
      for (let seed = 1; seed <= 3; seed++) {
        const answer = await ollama().chat({ model: head.modelId, messages: user, format: petSchema, options: { seed, num_predict: 256 } });
        expect(answer.done_reason, `seed ${seed}`).toBe('stop');
        expect(validate(JSON.parse(answer.message.content)), answer.message.content).toBe(true);
      }
      const generated = await ollama().generate({ model: head.modelId, prompt: 'A pet as JSON.', format: petSchema, options: { seed: 9, num_predict: 256 } });
      expect(validate(JSON.parse(generated.response ?? ''))).toBe(true);
      let text = '';
      for await (const chunk of await ollama().chat({ model: head.modelId, messages: user, format: 'json', stream: true, options: { seed: 2, num_predict: 96 } })) {
        text += chunk.message.content;
        if (chunk.done && chunk.done_reason === 'stop') expect(typeof JSON.parse(text)).toBe('object');
      }
      expect(text.startsWith('{')).toBe(true);
      const bad = await ollama().chat({ model: head.modelId, messages: user, format: { type: 'string', minLength: 9, maxLength: 2 } }).catch((e: unknown) => e);
      expect(bad).toMatchObject({ status_code: 400 });
    });

    it('tools: calls with object arguments that fit the schema, streamed and not; the result goes back as a tool turn', async () => {
      const validate = new Ajv().compile(weatherTool.function.parameters);
      const messages = [{ role: 'user', content: 'Weather in Paris?' }];
      // `tool_choice` is meshnet's extension (random weights rarely choose a call on their own).
      const request = { model: head.modelId, messages, tools: [weather], tool_choice: 'required', options: { seed: 1, num_predict: 512 } } as ChatRequest;
      const answer = await ollama().chat({ ...request, stream: false });
      const calls = answer.message.tool_calls ?? [];
      expect(calls.length).toBeGreaterThan(0);
      for (const call of calls) {
        expect(call.function.name).toBe('get_weather');
        expect(validate(call.function.arguments), JSON.stringify(call.function.arguments)).toBe(true);
      }
      expect(answer.message.content).not.toContain('<tool_call>');
      const streamed: unknown[] = [];
      for await (const chunk of await ollama().chat({ ...request, stream: true })) streamed.push(...(chunk.message.tool_calls ?? []).map((c) => c.function));
      expect(streamed).toEqual(calls.map((c) => c.function));
      const next = await ollama().chat({
        model: head.modelId,
        messages: [...messages, { role: 'assistant', content: '', tool_calls: calls }, { role: 'tool', tool_name: 'get_weather', content: '{"temp": 18}' }],
        tools: [weather],
        options: { seed: 2, num_predict: 8 },
      });
      expect(next.done).toBe(true);
      const auto = await ollama().chat({ model: head.modelId, messages, tools: [weather], options: { seed: 3, num_predict: 64 } });
      expect(auto.message.content).not.toContain('<tool_call>');
    });
  });
}
