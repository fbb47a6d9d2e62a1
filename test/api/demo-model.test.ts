/**
 * The demo model (aidreams260k, `model: 'demo'`) through the official client, as `npm start`
 * serves it: split across the head and two local peer processes. Completions from BOS give
 * llama2.c's golden text; the printed curl's chat message gets English words, made of the
 * model's own pieces (no byte fallback); chat answers end at a sentence's end (`stop`, the
 * natural end in its generation_config.json) or at 48 tokens by default; its 128-position
 * context is enforced; streamed deltas reassemble to the whole answer, and stop strings hold
 * across its sub-word tokens.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exampleRequest } from '../../src/node/cli/serve-command.ts';
import { DEMO_MODEL_DIR } from '../../src/node/models/demo-model.ts';
import { serveHead, type ServingHead } from '../../src/node/serve/serve-head.ts';
import { loadTokenizer } from '../../src/node/tokenizer-files.ts';
import { BIN } from '../cli/run-cli.ts';
import { aidreamsGolden, tempDir } from '../engine/harness.ts';
import { clientFor, thrown } from './api-harness.ts';

let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
let client: OpenAI;
const logs: string[] = [];

beforeAll(async () => {
  home = await tempDir('api-demo');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  serving = await serveHead({
    model: 'demo',
    port: 0,
    host: '127.0.0.1',
    localPeers: 2,
    link: 'relay',
    headLayers: 'auto',
    maxSessions: 4,
    device: 'cpu',
    dtype: 'fp32',
    threads: 1,
    log: (line) => logs.push(line),
  });
  await serving.head.waitForPeers(2, 60_000);
  client = clientFor(serving);
}, 90_000);

afterAll(async () => {
  await serving?.close();
  await home?.remove();
});

/** The printed curl's request body (greedy, no max_tokens: the demo's own 48 and its natural end apply). */
const curlRequest = exampleRequest('demo', true) as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;
const WORD = /^[A-Za-z',.-]+$/;

describe("model 'demo' (aidreams260k)", () => {
  it('is listed as demo with its 128-position context, and uses its own chat template', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['demo']);
    expect((models.data[0] as unknown as { max_model_len: number }).max_model_len).toBe(128);
    expect(logs.filter((l) => l.includes('fallback'))).toEqual([]);
  });

  it('/v1/completions from [1], greedy, 64 tokens, over the head and two peers: exactly the golden text', async () => {
    const golden = aidreamsGolden();
    const completion = await client.completions.create({ model: 'demo', prompt: [1], max_tokens: 64, temperature: 0 });
    expect(completion.choices[0].text).toBe(golden.text);
    expect(completion.choices[0].text.startsWith('"Echoes of')).toBe(true);
    expect(completion.usage?.completion_tokens).toBe(64);
    // The route really went through the local peer processes.
    const peers = serving.head.mesh.plan().hops.map((h) => h.peerId);
    expect(peers).toEqual(expect.arrayContaining(['local-1', 'local-2']));
  });

  it("the printed curl's message: English words, made of the model's own pieces, ended by the model itself at a sentence's end", async () => {
    expect(curlRequest).toEqual({ model: 'demo', messages: [{ role: 'user', content: 'Hello!' }], temperature: 0 });
    const answer = await client.chat.completions.create(curlRequest);
    const text = answer.choices[0].message.content!;
    const words = text.split(/\s+/).filter((w) => WORD.test(w));
    expect(words.length, text).toBeGreaterThanOrEqual(5);
    expect(answer.usage?.completion_tokens).toBe(36);
    expect(answer.choices[0].finish_reason).toBe('stop'); // meshnet_natural_end: the first '.' after 12 tokens
    expect(text.endsWith('.')).toBe(true);

    // The same greedy decode in one process gives the token ids: none is a byte piece (3…258).
    const tokenizer = await loadTokenizer(DEMO_MODEL_DIR);
    const promptIds = tokenizer.encode(tokenizer.chatTemplate.render([{ role: 'user', content: 'Hello!' }], { addGenerationPrompt: true }), { addSpecialTokens: false });
    expect(promptIds).toHaveLength(answer.usage!.prompt_tokens);
    const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'generate', '--model', 'demo', '--prompt-ids', promptIds.join(','), '--max-tokens', String(answer.usage!.completion_tokens), '--temperature', '0', '--device', 'cpu', '--json'], { env: process.env });
    const single = JSON.parse(stdout.trim().split('\n').at(-1)!) as { token_ids: number[]; text: string };
    expect(single.text).toBe(text);
    expect(single.token_ids.filter((id) => id >= 3 && id < 259)).toEqual([]);
  });

  it('a request that cannot fit the 128 positions gets 400 context_length_exceeded; a default-length one is cut to fit', async () => {
    const long = 'Echoes of vectors unfold, a gentle hum of precision. '.repeat(8);
    const error = (await thrown(() => client.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: long }], max_tokens: 48 }))) as { status: number; code: string };
    expect(error.status).toBe(400);
    expect(error.code).toBe('context_length_exceeded');
    const cut = await client.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: long.slice(0, 200) }], temperature: 0 });
    expect(cut.usage!.prompt_tokens + cut.usage!.completion_tokens).toBeLessThanOrEqual(128);
    expect(cut.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it('streamed chat deltas reassemble to exactly the whole answer, greedy and sampled', async () => {
    for (const sampling of [{ temperature: 0 }, { temperature: 0.8, seed: 3 }, { temperature: 1, seed: 11 }]) {
      const whole = await client.chat.completions.create({ ...curlRequest, ...sampling });
      const stream = await client.chat.completions.create({ ...curlRequest, ...sampling, stream: true });
      let text = '';
      let finish: string | null = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      expect(text).toBe(whole.choices[0].message.content);
      expect(finish).toBe(whole.choices[0].finish_reason);
    }
  });

  it('a stop string from inside the answer (across sub-word tokens) ends it there and never leaks', async () => {
    const whole = (await client.chat.completions.create(curlRequest)).choices[0].message.content!;
    const cut = whole.indexOf(' of ');
    expect(cut).toBeGreaterThan(0);
    const stream = await client.chat.completions.create({ ...curlRequest, stop: [' of '], stream: true });
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('stop');
    expect(text).toBe(whole.slice(0, cut));
  });

  it('seeded sampling is reproducible across sends: 12 prompts × 3 sends at temperature 1.3, cold and with the prefix reused, speculative and not', async () => {
    const topics = ['sea', 'sky', 'dream', 'vector', 'light', 'stone', 'river', 'night', 'song', 'garden', 'mirror', 'cloud'];
    for (const [i, topic] of topics.entries()) {
      // The first send is cold for its prompt; later ones reuse its prefix (another prefill split).
      const body = { model: 'demo', messages: [{ role: 'user' as const, content: `Tell me about the ${topic}, number ${i}.` }], temperature: 1.3, seed: 7 + i, max_tokens: 24, ...(i % 2 ? { speculate: 'off' } : {}) };
      const answers: string[] = [];
      for (let send = 0; send < 3; send++) answers.push((await client.chat.completions.create(body as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)).choices[0].message.content!);
      expect(new Set(answers).size, `${topic}: ${JSON.stringify(answers)}`).toBe(1);
    }
  });
});
