/**
 * HTTP fuzzing of one head (stories260k on loopback, `--request-timeout 1`) with a fixed seed:
 * the cases of fuzz-cases.ts (over 5,000: every field of every endpoint with every wrong type,
 * mutations, random bytes, truncated and nested JSON, huge strings, out-of-range ids, odd
 * methods and paths), plus bodies that never finish and raw bytes that are no HTTP, all
 * while greedy streams run. No answer is a 5xx, every error body is in OpenAI's shape (its
 * four keys, a message of at most 2 KiB), every body, success or error, conforms to the
 * OpenAI spec (specFetch: a mutation that stays valid must still echo only what the spec
 * allows), the streams are golden, the head still serves, and /metrics counts no 500.
 */
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { clientFor, serveStories } from '../api/api-harness.ts';
import { STORIES_GOLDEN, tempDir } from '../engine/harness.ts';
import { mulberry32 } from '../fixtures/checkpoints.ts';
import { expectSpec, specFetch } from '../openapi/spec-fetch.ts';
import { fuzzCases, type FuzzCase } from './fuzz-cases.ts';
import { exchange, postHead } from './raw-client.ts';

const SEED = 14;
let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;

beforeAll(async () => {
  home = await tempDir('http-fuzz');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  serving = await serveStories({ requestTimeoutMs: 1000, maxSessions: 64 });
});
afterAll(async () => {
  await serving?.close();
  await home?.remove();
});

/** Checks one answer; returns a problem, or undefined. */
function problem(c: FuzzCase, status: number, text: string): string | undefined {
  const where = `${c.kind} ${c.method} ${c.path.slice(0, 60)} ${typeof c.body === 'string' ? c.body.slice(0, 120) : ''}`;
  if (status >= 500) return `${status} for ${where}: ${text.slice(0, 200)}`;
  if (status < 400) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return `${status} without a JSON body for ${where}: ${text.slice(0, 200)}`;
  }
  const error = (json as { error?: Record<string, unknown> }).error;
  if (!error || Object.keys(json as object).join() !== 'error' || Object.keys(error).sort().join() !== 'code,message,param,type' || typeof error.message !== 'string') {
    return `${status} not in OpenAI's error shape for ${where}: ${text.slice(0, 200)}`;
  }
  if ((error.message as string).length > 2100) return `${status} message of ${(error.message as string).length} characters for ${where}`;
  try {
    expectSpec('ErrorResponse', json);
  } catch (error) {
    return `${status} for ${where}: ${String(error).slice(0, 300)}`;
  }
  return undefined;
}

async function send(base: string, c: FuzzCase): Promise<string | undefined> {
  const response = await specFetch(`${base}${c.path.slice(1)}`, {
    method: c.method,
    headers: { 'content-type': 'application/json' },
    ...(c.body !== undefined && { body: c.body as BodyInit }),
  });
  const text = await response.text(); // streams too: read to the end
  return problem(c, response.status, text);
}

it('over 5,000 fixed-seed cases, bodies that never finish and raw garbage: no 5xx, OpenAI error bodies, golden streams, no 500 in /metrics', { timeout: 240_000 }, async () => {
  const base = serving.head.url;
  const cases = fuzzCases(SEED);
  expect(cases.length).toBeGreaterThanOrEqual(5000);
  const problems: string[] = [];
  const started = Date.now();

  // Greedy streams all along.
  let fuzzing = true;
  const goldens: number[][] = [];
  const client = clientFor(serving);
  const streams = (async () => {
    while (fuzzing || goldens.length < 3) {
      const stream = await client.completions.create({ model: 'stories260k', prompt: [1], max_tokens: STORIES_GOLDEN.length, temperature: 0, stream: true });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
      goldens.push(text.trim().split(/\s+/).map((t) => Number(t.slice(1))));
    }
  })();

  // Bodies that never finish and bytes that are no HTTP, at the same time.
  const random = mulberry32(SEED);
  const stalled = Array.from({ length: 20 }, () => exchange(base, [postHead('/v1/chat/completions', 500), '{"model":"stories'], { waitMs: 8000 }));
  const raw = Array.from({ length: 50 }, (_, i) =>
    exchange(base, [Uint8Array.from({ length: 1 + Math.floor(random() * 400) }, () => Math.floor(random() * 256)), ...(i % 2 ? ['\r\n\r\n'] : [])], { waitMs: 8000 }),
  );

  let next = 0;
  const statuses = new Map<number, number>();
  await Promise.all(
    Array.from({ length: 12 }, async () => {
      while (next < cases.length) {
        const index = next++;
        const c = cases[index]!;
        const found = await send(base, c).catch((error: unknown) => `no answer for ${c.kind} ${c.path}: ${String(error)}`);
        if (found) problems.push(found);
      }
    }),
  );
  const fuzzMs = Date.now() - started;
  for (const answer of await Promise.all(stalled)) {
    expect(answer.status).toBe(408);
    expect(answer.stillOpen).toBe(false);
    const found = problem({ kind: 'stalled', method: 'POST', path: '/v1/chat/completions' }, answer.status, answer.body);
    if (found) problems.push(found);
  }
  for (const answer of await Promise.all(raw)) {
    statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
    expect(answer.stillOpen, 'a raw connection left open').toBe(false);
    if (answer.status === 0) continue; // closed without an answer (nothing parsable came)
    const found = problem({ kind: 'raw bytes', method: '?', path: '?' }, answer.status, answer.body);
    if (found) problems.push(found);
  }
  fuzzing = false;
  await streams;
  console.log(`http fuzz: ${cases.length} cases + 20 stalled bodies + 50 raw connections in ${fuzzMs} ms; raw statuses ${JSON.stringify([...statuses])}; ${goldens.length} greedy streams`);
  expect(problems.slice(0, 20)).toEqual([]);
  expect(goldens.length).toBeGreaterThanOrEqual(3);
  for (const ids of goldens) expect(ids).toEqual(STORIES_GOLDEN);
  const metrics = await (await fetch(`${base}metrics`)).text();
  expect(metrics).not.toMatch(/status="5\d\d"/);
  expect(metrics).toMatch(/meshnet_requests_total\{endpoint="\/v1\/chat\/completions",status="400"\} \d{3,}/);
  expect((await fetch(`${base}health`)).status).toBe(200);
});
