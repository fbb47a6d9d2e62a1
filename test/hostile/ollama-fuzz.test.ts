/**
 * Hostile input for Ollama's API on one head (stories260k on loopback, `--request-timeout 1`),
 * with a fixed seed: POST /api/chat, /api/generate and /api/show get every field with wrong
 * types, absent fields, random mutations of several fields (huge and negative numbers, unknown
 * options, bad `format` schemas, bad `tools`, bad message roles), non-JSON bytes, JSON cut
 * short and deep nesting; the GET routes get odd queries; bodies that never finish and raw
 * bytes that are no HTTP come at the same time. No answer is a 5xx, every refusal is Ollama's
 * shape (`{ "error": "<non-empty string>" }`, JSON), the head still gives the golden stories
 * answer through the OpenAI client, and /metrics counts no 5xx. Every valid base asks for at
 * most two tokens without streaming, so a mutation that stays valid is cheap to serve.
 */
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { clientFor, serveStories } from '../api/api-harness.ts';
import { STORIES_GOLDEN, tempDir } from '../engine/harness.ts';
import { mulberry32 } from '../fixtures/checkpoints.ts';
import { exchange, postHead } from './raw-client.ts';

const SEED = 11;
const MODEL = 'stories260k';
const NESTED = '__NESTED__';

interface Case {
  readonly kind: string;
  readonly method: string;
  readonly path: string;
  readonly body?: string | Uint8Array;
}
type Path = readonly (string | number)[];

const BASES: Record<string, Record<string, unknown>> = {
  '/api/chat': { model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: false, options: { num_predict: 1, temperature: 0 } },
  '/api/generate': { model: MODEL, prompt: 'hi', stream: false, options: { num_predict: 2, temperature: 0 } },
  '/api/show': { model: MODEL },
};
const OPTIONS: Path[] = [
  ['options'], ['options', 'num_predict'], ['options', 'temperature'], ['options', 'top_p'], ['options', 'top_k'], ['options', 'min_p'], ['options', 'seed'],
  ['options', 'stop'], ['options', 'stop', 0], ['options', 'repeat_penalty'], ['options', 'repeat_last_n'], ['options', 'presence_penalty'],
  ['options', 'frequency_penalty'], ['options', 'mirostat'], ['options', 'typical_p'], ['options', 'tfs_z'], ['options', 'num_ctx'], ['options', 'bogus'],
];
const COMMON: Path[] = [['model'], ['stream'], ['format'], ['keep_alive'], ['think'], ['logprobs'], ['top_logprobs'], ...OPTIONS];
const FIELDS: Record<string, readonly Path[]> = {
  '/api/chat': [
    ...COMMON, ['messages'], ['messages', 0], ['messages', 0, 'role'], ['messages', 0, 'content'], ['messages', 0, 'images'], ['messages', 0, 'thinking'],
    ['messages', 0, 'tool_calls'], ['messages', 0, 'tool_calls', 0], ['messages', 0, 'tool_calls', 0, 'function'], ['messages', 0, 'tool_calls', 0, 'function', 'arguments'],
    ['messages', 0, 'tool_name'], ['messages', 1], ['messages', 1, 'role'], ['tools'], ['tools', 0], ['tools', 0, 'type'], ['tools', 0, 'function'],
    ['tools', 0, 'function', 'name'], ['tools', 0, 'function', 'parameters'], ['tool_choice'],
  ],
  '/api/generate': [...COMMON, ['prompt'], ['system'], ['raw'], ['suffix'], ['template'], ['context'], ['context', 0], ['images'], ['images', 0]],
  '/api/show': [['model'], ['name'], ['verbose']],
};

/** Wrong values (and the ones mutations draw from): wrong types, huge and negative numbers, bad roles, schemas and tools. */
const VALUES: readonly unknown[] = [
  null, true, false, 0, -1, -3, 1.5, 1e308, -1e308, 2 ** 53, '', 'x', 'json', 'assistant', 'tool', 'system', 'robot', '\u0000\ud800', 'é'.repeat(3000),
  [], [1], [null], [{}], { a: 1 }, { type: 'object', properties: { a: { type: 'nope' } } }, { type: 'array', items: { $ref: '#/nowhere' } },
  { type: 'string', pattern: '(' }, { role: 'robot', content: 'x' }, { type: 'function', function: { name: '' } }, { type: 'function', function: { name: 'f', parameters: 'x' } },
  NESTED,
];

const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;
function setPath(target: Record<string, unknown>, at: Path, value: unknown): void {
  let node: Record<string | number, unknown> = target;
  for (let i = 0; i < at.length - 1; i++) {
    const next = node[at[i]!];
    if (typeof next !== 'object' || next === null) node[at[i]!] = typeof at[i + 1] === 'number' ? [] : {};
    node = node[at[i]!] as Record<string | number, unknown>;
  }
  if (value === undefined) delete node[at[at.length - 1]!];
  else node[at[at.length - 1]!] = clone(value); // a copy: later paths may write into it
}
const serialize = (body: unknown, depth: number) => JSON.stringify(body).replaceAll(`"${NESTED}"`, '['.repeat(depth) + ']'.repeat(depth));

/** Keeps a body cheap if it stays valid: no stream, at most two tokens. */
function cheap(body: Record<string, unknown>, pick: <T>(items: readonly T[]) => T): void {
  if (body.stream === true || body.stream === undefined) body.stream = false;
  if (body.options === undefined || body.options === null) body.options = { num_predict: 1 };
  const options = body.options as Record<string, unknown>;
  if (typeof options === 'object' && !Array.isArray(options)) {
    const n = options.num_predict;
    if (typeof n !== 'number' || n > 2 || n < 0) options.num_predict = pick([1, 2, 0, -3, 'x', 2.5]);
  }
}

function ollamaCases(seed: number): Case[] {
  const random = mulberry32(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const cases: Case[] = [];
  const posts = Object.keys(BASES);
  for (const route of posts) {
    for (const field of FIELDS[route]!) {
      // Each field gets a few wrong values (a fifth of them, drawn), nesting, and its absence.
      for (const value of VALUES.filter(() => random() < 0.2)) {
        const body = clone(BASES[route]!);
        setPath(body, field, value);
        if (route !== '/api/show') cheap(body, pick);
        cases.push({ kind: 'field type', method: 'POST', path: route, body: serialize(body, pick([65, 300, 5000])) });
      }
      const absent = clone(BASES[route]!);
      setPath(absent, field, undefined);
      if (route !== '/api/show') cheap(absent, pick);
      cases.push({ kind: 'field absent', method: 'POST', path: route, body: JSON.stringify(absent) });
    }
  }
  for (let i = 0; i < 150; i++) {
    const route = pick(posts);
    const body = clone(BASES[route]!);
    for (let j = 1 + Math.floor(random() * 4); j > 0; j--) setPath(body, pick(FIELDS[route]!), pick(VALUES));
    if (route !== '/api/show') cheap(body, pick);
    cases.push({ kind: 'mutation', method: 'POST', path: route, body: serialize(body, pick([64, 65, 300])) });
  }
  for (let i = 0; i < 40; i++) {
    cases.push({ kind: 'random bytes', method: 'POST', path: pick(posts), body: Uint8Array.from({ length: Math.floor(random() * 2000) }, () => Math.floor(random() * 256)) });
  }
  for (let i = 0; i < 40; i++) {
    const route = pick(posts);
    const text = JSON.stringify({ ...BASES[route]!, keep_alive: '5m' });
    cases.push({ kind: 'truncated json', method: 'POST', path: route, body: text.slice(0, Math.floor(random() * text.length)) });
  }
  for (const text of ['', 'null', '[]', '"x"', '42', 'true', '{', '}{', 'model=stories260k', '{"model":"stories260k"}{}']) {
    for (const route of posts) cases.push({ kind: 'not an object', method: 'POST', path: route, body: text });
  }
  for (let i = 0; i < 20; i++) {
    const route = pick(posts);
    cases.push({ kind: 'nested json', method: 'POST', path: route, body: serialize(random() < 0.5 ? NESTED : { model: MODEL, options: NESTED }, pick([257, 10_000, 100_000])) });
  }
  for (let i = 0; i < 20; i++) {
    cases.push({ kind: 'get', method: 'GET', path: `${pick(['/api/tags', '/api/ps', '/api/version'])}${pick(['', '?x=1', '?model=%00', `?${'q'.repeat(3000)}`])}` });
  }
  return cases;
}

let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;

beforeAll(async () => {
  home = await tempDir('ollama-fuzz');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  serving = await serveStories({ requestTimeoutMs: 1000, maxSessions: 64 });
});
afterAll(async () => {
  await serving?.close();
  await home?.remove();
});

/** Checks one answer; returns a problem, or undefined. */
function problem(c: Case, status: number, text: string): string | undefined {
  const where = `${c.kind} ${c.method} ${c.path.slice(0, 40)} ${typeof c.body === 'string' ? c.body.slice(0, 160) : ''}`;
  if (status >= 500) return `${status} for ${where}: ${text.slice(0, 200)}`;
  if (status < 300) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return `${status} without a JSON body for ${where}: ${text.slice(0, 200)}`;
  }
  const error = (json as { error?: unknown } | null)?.error;
  if (typeof json !== 'object' || json === null || Object.keys(json).join() !== 'error' || typeof error !== 'string' || error === '') {
    return `${status} not in Ollama's error shape for ${where}: ${text.slice(0, 200)}`;
  }
  return undefined;
}

it('hundreds of fixed-seed Ollama cases, stalled bodies and raw garbage: no 5xx, Ollama error bodies, the head still golden, no 5xx in /metrics', { timeout: 60_000 }, async () => {
  const base = serving.head.url;
  const cases = ollamaCases(SEED);
  expect(cases.length).toBeGreaterThanOrEqual(300);
  const problems: string[] = [];
  const started = Date.now();

  const random = mulberry32(SEED ^ 0xbad);
  const stalled = Array.from({ length: 6 }, (_, i) => {
    const route = ['/api/chat', '/api/generate', '/api/show'][i % 3]!;
    return { route, answer: exchange(base, [postHead(route, 500), '{"model":"stories'], { waitMs: 8000 }) };
  });
  const raw = Array.from({ length: 20 }, (_, i) =>
    exchange(base, [...(i % 2 ? [`POST /api/chat HTTP/1.1\r\n`] : []), Uint8Array.from({ length: 1 + Math.floor(random() * 400) }, () => Math.floor(random() * 256)), '\r\n\r\n'], { waitMs: 8000 }),
  );

  let next = 0;
  const statuses = new Map<number, number>();
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < cases.length) {
        const c = cases[next++]!;
        try {
          const response = await fetch(`${base}${c.path.slice(1)}`, {
            method: c.method,
            headers: { 'content-type': 'application/json' },
            ...(c.body !== undefined && { body: c.body as BodyInit }),
          });
          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
          const found = problem(c, response.status, await response.text());
          if (found) problems.push(found);
        } catch (error) {
          problems.push(`no answer for ${c.kind} ${c.path}: ${String(error)}`);
        }
      }
    }),
  );
  const fuzzMs = Date.now() - started;
  for (const { route, answer } of stalled) {
    const got = await answer;
    expect(got.status).toBe(408);
    expect(got.stillOpen).toBe(false);
    const found = problem({ kind: 'stalled', method: 'POST', path: route }, got.status, got.body);
    if (found) problems.push(found);
  }
  for (const got of await Promise.all(raw)) {
    expect(got.stillOpen, 'a raw connection left open').toBe(false);
    expect(got.status < 500, `raw bytes answered ${got.status}: ${got.body.slice(0, 200)}`).toBe(true);
  }
  console.log(`ollama fuzz: ${cases.length} cases + ${stalled.length} stalled bodies + ${raw.length} raw connections in ${fuzzMs} ms; statuses ${JSON.stringify([...statuses])}`);
  expect(problems.slice(0, 20)).toEqual([]);
  expect(statuses.get(200) ?? 0).toBeGreaterThan(10);

  const answer = await clientFor(serving).completions.create({ model: MODEL, prompt: [1], max_tokens: STORIES_GOLDEN.length, temperature: 0 });
  expect(answer.choices[0]!.text.trim().split(/\s+/).map((t) => Number(t.slice(1)))).toEqual(STORIES_GOLDEN);
  const metrics = await (await fetch(`${base}metrics`)).text();
  expect(metrics).not.toMatch(/status="5\d\d"/);
  expect(metrics).toMatch(/meshnet_requests_total\{endpoint="\/api\/chat",status="400"\} \d{2,}/);
  expect((await fetch(`${base}health`)).status).toBe(200);
});
