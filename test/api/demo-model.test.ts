/**
 * The built-in demo model through the official client (`model: 'demo'`, generated under a
 * temporary MESHNET_HOME): its own chat template and byte-level BPE tokenizer, so streamed
 * deltas must reassemble to exactly the whole answer, and stop strings must hold across
 * token boundaries of real sub-word tokens.
 */
import path from 'node:path';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveHead, type ServingHead } from '../../src/node/serve/serve-head.ts';
import { tempDir } from '../engine/harness.ts';
import { clientFor } from './api-harness.ts';

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
    localPeers: 0,
    link: 'relay',
    headLayers: 'auto',
    maxSessions: 4,
    device: 'cpu',
    dtype: 'fp32',
    threads: 1,
    log: (line) => logs.push(line),
  });
  client = clientFor(serving);
});

afterAll(async () => {
  await serving?.close();
  await home?.remove();
});

const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
  { role: 'system', content: 'You are brief.' },
  { role: 'user', content: 'Tell me about the sea.' },
];

/**
 * Greedy decoding of this random-weight model repeats one token; a hot seeded sample gives a
 * few different sub-word tokens (newlines, then a repeated word). The first seed whose answer
 * is not one repeated character, with that answer.
 */
async function variedSample(): Promise<{ sampled: { temperature: number; seed: number }; whole: string; finish: string }> {
  for (let seed = 1; seed <= 20; seed++) {
    const sampled = { temperature: 1.5, seed };
    const answer = await client.chat.completions.create({ model: 'demo', messages, max_tokens: 24, ...sampled });
    const whole = answer.choices[0].message.content!;
    if (new Set(whole).size > 1) return { sampled, whole, finish: answer.choices[0].finish_reason };
  }
  throw new Error('no seed in 1..20 gave more than one distinct character');
}

async function streamedChat(extra: Partial<OpenAI.Chat.ChatCompletionCreateParamsStreaming> = {}) {
  const stream = await client.chat.completions.create({ model: 'demo', messages, max_tokens: 24, temperature: 0, ...extra, stream: true });
  let text = '';
  let finish: string | null = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  return { text, finish };
}

describe("model 'demo'", () => {
  it("is listed as 'demo' and uses its own chat template (no fallback notice)", async () => {
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(['demo']);
    expect((await client.chat.completions.create({ model: 'demo', messages, max_tokens: 2 })).model).toBe('demo');
    expect(logs.filter((l) => l.includes('fallback'))).toEqual([]);
  });

  it('streamed chat deltas reassemble to exactly the whole answer', async () => {
    const { sampled, whole, finish } = await variedSample();
    const streamed = await streamedChat(sampled);
    expect(streamed.text).toBe(whole);
    expect(streamed.finish).toBe(finish);
  });

  it('a stop string taken from inside the answer ends it there and never leaks', async () => {
    const { sampled, whole } = await variedSample();
    // From the first change of character: the stop string's first occurrence is there.
    const cut = [...whole].findIndex((ch, i) => i > 0 && ch !== whole[0]);
    expect(cut).toBeGreaterThan(0);
    const stop = whole.slice(cut, cut + 3);
    expect(stop).toHaveLength(3);
    const streamed = await streamedChat({ ...sampled, stop: [stop] });
    expect(streamed.finish).toBe('stop');
    expect(streamed.text).toBe(whole.slice(0, cut));
  });

  it('seeded sampling is reproducible', async () => {
    const a = await streamedChat({ temperature: 0.9, seed: 99 });
    const b = await client.chat.completions.create({ model: 'demo', messages, max_tokens: 24, temperature: 0.9, seed: 99 });
    expect(a.text).toBe(b.choices[0].message.content);
  });
});
