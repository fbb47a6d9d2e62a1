/**
 * Slow, oversized and vanishing clients against a real head (stories260k on loopback,
 * `--request-timeout 1`): bodies that never finish and headers that never end are answered
 * 408 in OpenAI's shape and their connections closed within the bound, 20 at once, while a
 * greedy stream stays golden; a 4 MiB + 1 body is a 413 that closes its connection; a 3 MiB
 * model name is not echoed back; a client that leaves during its upload is a client abort
 * (499) in /metrics, not a 500, and one that leaves mid-answer is counted too; /metrics shows
 * each peer's KV and repairs by cause.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { STORIES_GOLDEN, tempDir } from '../engine/harness.ts';
import { serveStories } from '../api/api-harness.ts';
import { expectSpec } from '../openapi/spec-fetch.ts';
import { exchange, postHead } from './raw-client.ts';

const TIMEOUT_MS = 1000;
let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
let url: string;

beforeAll(async () => {
  home = await tempDir('slow-clients');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  serving = await serveStories({ requestTimeoutMs: TIMEOUT_MS, maxSessions: 32 });
  url = serving.head.url;
});
afterAll(async () => {
  await serving?.close();
  await home?.remove();
});

const completion = JSON.stringify({ model: 'stories260k', prompt: [1], max_tokens: 32, temperature: 0 });

async function metricsText(): Promise<string> {
  const response = await fetch(`${url}metrics`);
  expect(response.status).toBe(200);
  return response.text();
}
/** Polls /metrics until `check` holds on it (or `timeoutMs` passes); the last text. */
async function metricsUntil(check: (text: string) => boolean, timeoutMs = 6000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await metricsText();
    if (check(text) || Date.now() > deadline) return text;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
const sample = (text: string, series: string) => Number(text.split('\n').find((line) => line.startsWith(`${series} `))?.slice(series.length + 1) ?? NaN);

/** The greedy completion of [1], streamed: its token ids (t<id> texts). */
async function greedyIds(): Promise<number[]> {
  const response = await fetch(`${url}v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: completion.replace('"max_tokens":32', '"max_tokens":32,"stream":true') });
  expect(response.status).toBe(200);
  const text = await response.text();
  const ids = [...text.matchAll(/"text":" ?t(\d+)"/g)].map((m) => Number(m[1]));
  return ids;
}

/** An OpenAI error body (checked against the spec's ErrorResponse); its error. */
function openAIError(body: string): { message: string; code: string | null } {
  const json = JSON.parse(body) as { error: { message: string; code: string | null } };
  expectSpec('ErrorResponse', json);
  expect(Object.keys(json.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  return json.error;
}

describe('slow clients are bounded by --request-timeout', () => {
  it('20 bodies that never finish and 20 headers that never end: 408 in OpenAI shape, closed within the bound; a stream meanwhile is golden', async () => {
    const started = Date.now();
    const bodies = Array.from({ length: 20 }, () => exchange(url, [postHead('/v1/completions', completion.length), completion.slice(0, 12)], { waitMs: 8000 }));
    const heads = Array.from({ length: 20 }, () => exchange(url, ['POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl'], { waitMs: 8000 }));
    expect(await greedyIds()).toEqual(STORIES_GOLDEN);
    const answers = await Promise.all([...bodies, ...heads]);
    for (const answer of answers) {
      expect(answer.stillOpen).toBe(false);
      expect(answer.status).toBe(408);
      expect(answer.headers.connection).toBe('close');
      expect(answer.headers['x-request-id']).toMatch(/^req_[0-9a-f]{32}$/); // like every other response (Node's own 408 included)
      expect(openAIError(answer.body).code).toBe('request_timeout');
      expect(answer.closedAfterMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    }
    // The bound: the timeout plus Node's check interval (a quarter of it) and scheduling.
    expect(Math.max(...answers.map((a) => a.closedAfterMs))).toBeLessThan(TIMEOUT_MS * 4);
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS * 6);
  });

  it('a body trickled in slower than the bound is cut at the bound, not held open', async () => {
    const parts: (string | number)[] = [postHead('/v1/completions', completion.length)];
    for (const char of completion) parts.push(char, 150); // the whole body would take ~12 s
    const answer = await exchange(url, parts, { waitMs: 8000 });
    expect(answer.status).toBe(408);
    expect(answer.closedAfterMs).toBeLessThan(TIMEOUT_MS * 4);
  });

  it('a body sent in pieces within the bound is served', async () => {
    const answer = await exchange(url, [postHead('/v1/completions', completion.length, { close: true }), completion.slice(0, 20), 200, completion.slice(20)], { waitMs: 8000 });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ object: 'text_completion' });
  });
});

describe('oversized input', () => {
  it('keeps the 4 MiB limit: 4 MiB + 1 declared or streamed in chunks is a 413 that closes the connection', async () => {
    const declared = await exchange(url, [postHead('/v1/chat/completions', 4 * 2 ** 20 + 1), '{"model":'], { waitMs: 5000 });
    expect(declared.status).toBe(413);
    expect(declared.headers.connection).toBe('close');
    expect(openAIError(declared.body).code).toBe('request_too_large');
    const chunk = 'x'.repeat(1 << 20);
    const chunked = [`POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`];
    for (let i = 0; i < 5; i++) chunked.push(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    const streamed = await exchange(url, chunked, { waitMs: 5000 });
    expect(streamed.status).toBe(413);
    expect(streamed.stillOpen).toBe(false);
  });

  it('a 3 MiB model name, a huge path and a huge role are quoted short', async () => {
    const huge = 'm'.repeat(3 * 2 ** 20);
    const model = await fetch(`${url}v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: huge, messages: [{ role: 'user', content: 'x' }] }) });
    expect(model.status).toBe(404);
    const modelText = await model.text();
    expect(modelText.length).toBeLessThan(400);
    expect(openAIError(modelText).message).toMatch(/^The model 'm{64}…' does not exist/);
    const role = await fetch(`${url}v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'stories260k', messages: [{ role: huge, content: 'x' }] }) });
    expect(role.status).toBe(400);
    expect((await role.text()).length).toBeLessThan(600);
    const longPath = await fetch(`${url}v1/${'p'.repeat(12_000)}`);
    expect(longPath.status).toBe(404);
    expect((await longPath.text()).length).toBeLessThan(400);
  });
});

describe('accounting of clients that leave', () => {
  it('a client gone during its upload is a client abort (499), never a 500', async () => {
    const before = await metricsText();
    const aborts = sample(before, 'meshnet_client_aborts_total{stage="upload"}');
    for (let i = 0; i < 3; i++) await exchange(url, [postHead('/v1/completions', completion.length), completion.slice(0, 10)], { abortAfterMs: 50 });
    const after = await metricsUntil((text) => sample(text, 'meshnet_client_aborts_total{stage="upload"}') === aborts + 3);
    expect(sample(after, 'meshnet_client_aborts_total{stage="upload"}')).toBe(aborts + 3);
    expect(sample(after, 'meshnet_requests_total{endpoint="/v1/completions",status="499"}')).toBeGreaterThanOrEqual(3);
    expect(after).not.toMatch(/status="5\d\d"/);
  });

  it('a client gone mid-answer is counted as an abort of its answer', async () => {
    const aborts = sample(await metricsText(), 'meshnet_client_aborts_total{stage="answer"}');
    const abort = new AbortController();
    const response = await fetch(`${url}v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'stories260k', prompt: [1], max_tokens: 100, stream: true }), signal: abort.signal });
    const reader = response.body!.getReader();
    await reader.read();
    abort.abort();
    const text = await metricsUntil((t) => sample(t, 'meshnet_client_aborts_total{stage="answer"}') === aborts + 1);
    expect(sample(text, 'meshnet_client_aborts_total{stage="answer"}')).toBe(aborts + 1);
  });

  it('/metrics shows each peer\'s KV and repairs by cause', async () => {
    const text = await metricsUntil((t) => t.includes('meshnet_peer_kv_entries{peer="head"}'));
    expect(text).toContain('meshnet_peer_kv_entries{peer="head"}');
    expect(sample(text, 'meshnet_peer_kv_bytes{peer="head"}')).toBeGreaterThanOrEqual(0);
    for (const cause of ['cache_miss', 'lost', 'hung', 'faulty', 'mismatch']) expect(sample(text, `meshnet_repair_causes_total{cause="${cause}"}`)).toBe(0);
  });
});
