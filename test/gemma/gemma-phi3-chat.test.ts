/**
 * Chat over HTTP on a Gemma 3 conditional-generation checkpoint and a Phi-3 checkpoint, each
 * with random weights and its real tokenizer and chat template (test/fixtures/tokenizers/),
 * every layer in the head process, through the official OpenAI client (bodies and chunks
 * checked against the OpenAI spec):
 * - neither template knows tools, so tool calls go through the generic format
 *   (core/model/tools/generic-tools.ts): a required call, streamed and not, parses into a
 *   valid call; the next turn with the tool's result renders through the real template
 *   (Gemma's refuses turns that do not alternate) and is the prompt the server counted;
 * - an image part is refused with a typed 400: by name for the Gemma 3 checkpoint whose
 *   vision tower meshnet does not run (chat, Responses, Ollama), the generic text-only
 *   refusal for Phi-3.
 */
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import OpenAI from 'openai';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planStructuredChat } from '../../src/core/model/structured-output.ts';
import type { TextTokenizer } from '../../src/core/model/tokenizer.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { loadTokenizer } from '../../src/node/tokenizer-files.ts';
import { postRaw, serveStories } from '../api/api-harness.ts';
import { tempDir } from '../engine/harness.ts';
import { buildGemmaCheckpointFiles } from '../fixtures/gemma-checkpoints.ts';
import { buildPhi3CheckpointFiles } from '../fixtures/phi3-checkpoints.ts';
import { specFetch } from '../openapi/spec-fetch.ts';

const TOKENIZERS = path.resolve(import.meta.dirname, '../fixtures/tokenizers');

const parameters = {
  type: 'object',
  properties: { city: { enum: ['Oslo', 'Rome'] }, unit: { enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
} as const;
const tools = [{ type: 'function' as const, function: { name: 'get_weather', description: 'Current weather in a city', parameters } }];
const validArguments = new Ajv().compile(parameters);

interface Served {
  readonly dir: string;
  readonly serving: ServingHead;
  readonly client: OpenAI;
  readonly tokenizer: TextTokenizer;
}

/** Writes the checkpoint files, then the real tokenizer files over the tiny stand-ins, patching the config's special ids. */
async function serve(
  name: string,
  files: Map<string, Uint8Array | string>,
  tokenizerFiles: (dir: string) => Promise<void>,
  ids: Record<string, unknown>, // special ids (and other config keys) written into config.json
): Promise<Served> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `meshnet-${name}-chat-`));
  for (const [file, content] of files) await writeFile(path.join(dir, file), content);
  await tokenizerFiles(dir);
  const configPath = path.join(dir, 'config.json');
  const config = JSON.parse(await readFile(configPath, 'utf8')) as Record<string, unknown>;
  const text = config.text_config as Record<string, unknown> | undefined;
  await writeFile(configPath, JSON.stringify({ ...config, ...ids, ...(text ? { text_config: { ...text, ...ids } } : {}) }, null, 2));
  await writeFile(path.join(dir, 'generation_config.json'), JSON.stringify({ bos_token_id: ids.bos_token_id, eos_token_id: ids.eos_token_id }));
  const serving = await serveStories({ model: dir });
  const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000, fetch: specFetch });
  return { dir, serving, client, tokenizer: await loadTokenizer(dir) };
}

let home: { dir: string; remove: () => Promise<void> };
const served = new Map<string, Served>();
beforeAll(async () => {
  home = await tempDir('gemma-phi3-chat');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  const small = { hiddenSize: 32, numHeads: 2, numKvHeads: 1, intermediateSize: 64, numLayers: 2 };
  served.set(
    'gemma3',
    await serve(
      'gemma3',
      // Gemma 3's real vocabulary (262,208 rows, as the 4B/12B/27B checkpoints); window 3 < the prompts.
      buildGemmaCheckpointFiles({ version: 3, conditional: true, dtype: 'F32', tied: true, seed: 7, ...small, headDim: 16, vocabSize: 262_208, slidingWindow: 3, maxPositionEmbeddings: 8192 }),
      async (dir) => {
        await writeFile(path.join(dir, 'tokenizer.json'), gunzipSync(await readFile(path.join(TOKENIZERS, 'gemma3/tokenizer.json.gz'))));
        await copyFile(path.join(TOKENIZERS, 'gemma3/tokenizer_config.json'), path.join(dir, 'tokenizer_config.json'));
      },
      { bos_token_id: 2, eos_token_id: [1, 106], pad_token_id: 0 },
    ),
  );
  served.set(
    'phi3',
    await serve(
      'phi3',
      buildPhi3CheckpointFiles({ dtype: 'F32', tied: false, seed: 11, hiddenSize: 32, numHeads: 4, numKvHeads: 2, intermediateSize: 64, numLayers: 2, vocabSize: 32_064, slidingWindow: 4 }),
      async (dir) => {
        for (const file of ['tokenizer.json', 'tokenizer_config.json']) await copyFile(path.join(TOKENIZERS, 'phi-3-mini-4k-instruct', file), path.join(dir, file));
      },
      { bos_token_id: 1, eos_token_id: 32000, pad_token_id: 32000, max_position_embeddings: 4096 },
    ),
  );
}, 240_000);

afterAll(async () => {
  for (const s of served.values()) {
    await s.serving.close();
    await rm(s.dir, { recursive: true, force: true });
  }
  await home?.remove();
});

const get = (name: string): Served => {
  const s = served.get(name);
  if (!s) throw new Error(`${name} is not served`);
  return s;
};

/** Each template's own turn markers around the generic format's tool result turn. */
const RESULT_TURN: Record<string, string> = {
  gemma3: '<start_of_turn>user\n<tool_response>\n{"temp": 3}\n</tool_response><end_of_turn>',
  phi3: '<|user|>\n<tool_response>\n{"temp": 3}\n</tool_response><|end|>',
};

describe.each(['gemma3', 'phi3'])('%s: tool calls through the generic format', (name) => {
  it('the template has no tools: the generic format is chosen', () => {
    const { tokenizer } = get(name);
    const plan = planStructuredChat(tokenizer, {
      messages: [{ role: 'user', content: 'Weather?' }],
      tools: { tools: [{ name: 'get_weather', parameters }], choice: { type: 'required' }, parallel: false },
    });
    expect(tokenizer.chatTemplate.isFallback).toBe(false);
    expect(plan.toolFormat?.name).toBe('generic');
    expect(plan.prompt).toContain('You may call functions');
  });

  it('a required call, not streamed: finish_reason tool_calls, valid arguments', async () => {
    const { client, serving } = get(name);
    for (const seed of [1, 2]) {
      const answer = await client.chat.completions.create({
        model: serving.modelId,
        messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Weather in Oslo?' }],
        tools,
        tool_choice: 'required',
        parallel_tool_calls: false,
        seed,
        max_tokens: 256,
      });
      const choice = answer.choices[0];
      expect(choice.finish_reason).toBe('tool_calls');
      expect(choice.message.tool_calls).toHaveLength(1);
      const call = choice.message.tool_calls![0];
      if (call.type !== 'function') throw new Error(`a ${call.type} call`);
      expect(call.function.name).toBe('get_weather');
      expect(validArguments(JSON.parse(call.function.arguments))).toBe(true);
    }
  });

  it('a required call, streamed: the deltas join into a valid call', async () => {
    const { client, serving } = get(name);
    const stream = await client.chat.completions.create({
      model: serving.modelId,
      messages: [{ role: 'user', content: 'Weather in Rome?' }],
      tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
      stream: true,
      seed: 3,
      max_tokens: 256,
    });
    let args = '';
    let fn: string | undefined;
    let finish: string | null = null;
    let content = '';
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta;
      content += delta?.content ?? '';
      const call = delta?.tool_calls?.[0];
      if (call) {
        expect(call.index).toBe(0);
        fn ??= call.function?.name;
        args += call.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('tool_calls');
    expect(content).toBe('');
    expect(fn).toBe('get_weather');
    expect(validArguments(JSON.parse(args))).toBe(true);
  });

  it("the tool's result goes back through the real template as the next turn", async () => {
    const { client, serving, tokenizer } = get(name);
    const call = { id: 'call_1', type: 'function' as const, function: { name: 'get_weather', arguments: '{"city": "Oslo", "unit": "c"}' } };
    const answer = await client.chat.completions.create({
      model: serving.modelId,
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 3}' },
      ],
      tools,
      max_tokens: 4,
      temperature: 0,
    });
    expect(answer.choices[0].finish_reason === 'length' || answer.choices[0].finish_reason === 'stop' || answer.choices[0].finish_reason === 'tool_calls').toBe(true);
    const { prompt } = planStructuredChat(tokenizer, {
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city": "Oslo", "unit": "c"}' }] },
        { role: 'tool', content: '{"temp": 3}', toolCallId: 'call_1', name: 'get_weather' },
      ],
      tools: { tools: [{ name: 'get_weather', description: 'Current weather in a city', parameters }], choice: { type: 'auto' }, parallel: true },
    });
    expect(prompt).toContain(RESULT_TURN[name]);
    expect(prompt).toContain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}\n</tool_call>');
    // The prompt the server ran is that rendering (the template wrote any <bos> itself).
    expect(answer.usage?.prompt_tokens).toBe(tokenizer.encode(prompt, { addSpecialTokens: false }).length);
  });
});

describe('image input', () => {
  const image = { role: 'user' as const, content: [{ type: 'text' as const, text: 'What is this?' }, { type: 'image_url' as const, image_url: { url: 'data:image/png;base64,AAAA' } }] };

  it('Gemma3ForConditionalGeneration: chat refuses an image part by name (400 invalid_value)', async () => {
    const { client, serving } = get('gemma3');
    const error = await client.chat.completions.create({ model: serving.modelId, messages: [image], max_tokens: 2 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    const bad = error as InstanceType<typeof OpenAI.BadRequestError>;
    expect(bad.status).toBe(400);
    expect(bad.code).toBe('invalid_value');
    expect(bad.param).toBe('messages[0].content[1].type');
    expect(bad.message).toContain("'image_url' is not supported: this Gemma3ForConditionalGeneration checkpoint is served as text only");
    expect(bad.message).toContain('not its vision tower');
  });

  it('Gemma3ForConditionalGeneration: the Responses API and Ollama refuse images by name too', async () => {
    const { serving } = get('gemma3');
    const responses = await postRaw(
      `${serving.head.url}v1/responses`,
      JSON.stringify({ model: serving.modelId, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Hi' }, { type: 'input_image', image_url: 'data:image/png;base64,AAAA' }] }] }),
    );
    expect(responses.status).toBe(400);
    expect(JSON.stringify(responses.json)).toContain('Gemma3ForConditionalGeneration checkpoint is served as text only');
    const ollama = await fetch(`${serving.head.url}api/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: serving.modelId, messages: [{ role: 'user', content: 'Hi', images: ['AAAA'] }], stream: false }),
    });
    expect(ollama.status).toBe(400);
    expect(((await ollama.json()) as { error: string }).error).toContain('Gemma3ForConditionalGeneration checkpoint is served as text only');
  });

  it('Phi-3 (a text-only architecture): the generic text-only refusal', async () => {
    const { client, serving } = get('phi3');
    const error = await client.chat.completions.create({ model: serving.modelId, messages: [image], max_tokens: 2 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as Error).message).toContain("'image_url' is not supported. Supported values are: 'text' (this model reads text only).");
  });

  it('the Gemma 3 checkpoint still answers text', async () => {
    const { client, serving } = get('gemma3');
    const answer = await client.chat.completions.create({ model: serving.modelId, messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }], max_tokens: 6, temperature: 0 });
    expect(answer.choices[0].message.role).toBe('assistant');
    expect(answer.usage?.completion_tokens).toBeGreaterThan(0);
  });
});
