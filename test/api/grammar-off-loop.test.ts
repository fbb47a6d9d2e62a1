/**
 * Grammar work off the event loop (#27): a head over a random Qwen2.5-shaped checkpoint (the
 * real 151,936-token vocabulary) streams 4 free-text completions; meanwhile a request with a
 * new JSON schema arrives, and its grammar engine starts and compiles in the grammar worker.
 * The other streams keep producing tokens while it compiles: chunks arrive between the
 * constrained request's send and its answer, and no gap between them comes near that time.
 * The event-loop delay (monitorEventLoopDelay) over the window is printed, with the load, and
 * bounded: max < 1 s (the compile is not on the loop), p99 < 200 ms (what loaded CI allows).
 */
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { serveStories } from './api-harness.ts';
import { tempDir } from '../engine/harness.ts';
import { writeQwenChatModel } from '../fixtures/qwen-chat-model.ts';

let home: { dir: string; remove: () => Promise<void> };
let model: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
let client: OpenAI;

beforeAll(async () => {
  home = await tempDir('grammar-off-loop');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  model = await writeQwenChatModel();
  serving = await serveStories({ model: model.dir, maxSessions: 8 });
  client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
});

afterAll(async () => {
  await serving?.close();
  await model?.remove();
  await home?.remove();
});

const schema = {
  type: 'object',
  properties: {
    title: { type: 'string', minLength: 2, maxLength: 40 },
    year: { type: 'integer', minimum: 1900, maximum: 2100 },
    genres: { type: 'array', items: { enum: ['drama', 'comedy', 'horror', 'documentary', 'animation'] }, minItems: 1, maxItems: 3 },
    cast: { type: 'array', items: { type: 'object', properties: { name: { type: 'string', maxLength: 24 }, role: { type: 'string', maxLength: 16 } }, required: ['name', 'role'], additionalProperties: false }, maxItems: 4 },
    rating: { type: 'number', minimum: 0, maximum: 10 },
  },
  required: ['title', 'year', 'genres', 'cast', 'rating'],
  additionalProperties: false,
} as const;

it('other streams keep producing tokens while a new schema compiles', async () => {
  const arrivals: number[] = [];
  const abort = new AbortController();
  const streams = Array.from({ length: 4 }, async (_, i) => {
    const stream = await client.completions.create({ model: serving.modelId, prompt: `story ${i}`, max_tokens: 4000, temperature: 0.8, seed: i, stream: true }, { signal: abort.signal });
    try {
      for await (const chunk of stream) if (chunk.choices[0]?.text) arrivals.push(performance.now());
    } catch (error) {
      if (!abort.signal.aborted) throw error;
    }
  });
  // Until 20 tokens arrived; a stream that failed first ends the wait with its error.
  const failed = Promise.race(streams).then(() => Promise.reject(new Error('a stream ended before 20 tokens arrived')));
  failed.catch(() => {});
  while (arrivals.length < 20) await Promise.race([new Promise((resolve) => setTimeout(resolve, 10)), failed]);

  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  const sentAt = performance.now();
  const answer = await client.chat.completions.create({ model: serving.modelId, messages: [{ role: 'user', content: 'A film.' }], max_tokens: 12, seed: 3, response_format: { type: 'json_schema', json_schema: { name: 'film', schema } } });
  const answeredAt = performance.now();
  delay.disable();
  abort.abort();
  await Promise.allSettled(streams);

  const content = answer.choices[0].message.content ?? '';
  if (answer.choices[0].finish_reason === 'stop') expect(new Ajv().compile(schema)(JSON.parse(content))).toBe(true);
  else expect(content.startsWith('{'), content).toBe(true);
  const window = answeredAt - sentAt;
  const during = arrivals.filter((t) => t > sentAt && t < answeredAt);
  const points = [sentAt, ...during, answeredAt];
  const gaps = points.slice(1).map((t, i) => t - points[i]);
  const longest = Math.max(...gaps);
  console.log(`constrained request ${window.toFixed(0)} ms (engine start + compile + 12 tokens); other streams' tokens during it ${during.length}, longest gap ${longest.toFixed(0)} ms; event-loop delay p50 ${(delay.percentile(50) / 1e6).toFixed(1)} ms, p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms, max ${(delay.max / 1e6).toFixed(1)} ms; load average ${os.loadavg()[0].toFixed(1)}`);
  expect(during.length, 'the other streams produced tokens while the grammar compiled').toBeGreaterThan(10);
  expect(longest, 'no stall of the whole compile').toBeLessThan(window / 2);
  // The event loop itself: a compile costs ≥ 1.7 s of one thread at this vocabulary (on the
  // loop it stalled it 18.7 s under test load), so no delay may come near a second; p99 under
  // 200 ms is what CI's 2 loaded cores allow with margin (measured: 9 ms at load 0.5, 63 ms at
  // load 17) — the 20 ms is measured by `npm run bench:event-loop`, not asserted here.
  expect(delay.max / 1e6, 'no event-loop stall of the compile').toBeLessThan(1000);
  expect(delay.percentile(99) / 1e6, 'event-loop delay p99').toBeLessThan(200);
}, 180_000);
