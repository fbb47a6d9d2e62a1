/**
 * A browser app on another origin calls the API with `fetch` (real Chromium enforcing CORS).
 * The page comes from a second tiny loopback server on its own port, reached as
 * http://127.0.0.1:P (allowed) or http://localhost:P (the same server, another origin, which
 * the second head's `--cors` does not list):
 * - with `--api-key`: the preflight passes without the key and the keyed request succeeds;
 *   without a key the page sees the 401 and its OpenAI error body;
 * - without a key: chat (whole and streamed) and /v1/responses work from the page;
 * - a disallowed origin: fetch fails in the page, and the head sends no ACAO header.
 * Every body the page reads is checked against the OpenAI spec here in Node.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect, test } from '@playwright/test';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { expectSpec, specFetch, takeSpecViolations } from '../openapi/spec-fetch.ts';
import { COMPLETION_STREAM_CHUNK } from '../openapi/spec-schemas.ts';
import { startStoriesHead, useTempHome } from './mesh-fixture.ts';

const API_KEY = 'sk-cors-e2e';
let app: Server; // the other origin's page
let appPort: number;
let keyed: ServingHead; // --api-key, default --cors
let open: ServingHead; // no key, --cors http://127.0.0.1:P only

test.beforeAll(async () => {
  useTempHome();
  app = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>another app</title><p>an app on another origin</p>');
  });
  await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
  appPort = (app.address() as AddressInfo).port;
  // One after the other: two heads building the same artifacts at once in one MESHNET_HOME
  // can race in the artifact cache.
  keyed = await startStoriesHead({ apiKey: API_KEY, headLayers: 'auto' });
  open = await startStoriesHead({ cors: `http://127.0.0.1:${appPort}`, headLayers: 'auto' });
});

// Every API body Node receives here conforms to the OpenAI spec (test/openapi/spec-fetch.ts).
test.afterEach(() => expect(takeSpecViolations()).toEqual([]));

test.afterAll(async () => {
  await keyed?.close();
  await open?.close();
  await new Promise((resolve) => app?.close(resolve));
});

/** What the page got from one fetch: status, the headers it may read, and the body. */
interface PageResult {
  readonly ok: boolean;
  readonly status?: number;
  readonly requestId?: string | null;
  readonly body?: string;
  readonly error?: string;
}

/** Runs `fetch(url, init)` inside the page and reports what the page could see. */
function pageFetch(page: import('@playwright/test').Page, url: string, init: { method?: string; headers?: Record<string, string>; body?: string }): Promise<PageResult> {
  return page.evaluate(
    async ({ url, init }) => {
      try {
        const response = await fetch(url, init);
        return { ok: true, status: response.status, requestId: response.headers.get('x-request-id'), body: await response.text() };
      } catch (error) {
        return { ok: false, error: String(error) };
      }
    },
    { url, init },
  );
}

const chatBody = (stream = false) => JSON.stringify({ model: 'stories260k', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, temperature: 0, stream });
const json = { 'content-type': 'application/json' };

test('with --api-key: the preflight passes without the key, the keyed request is served, a keyless one is a readable 401', async ({ page }) => {
  await page.goto(`http://127.0.0.1:${appPort}/`);
  const served = await pageFetch(page, `${keyed.head.url}v1/chat/completions`, { method: 'POST', headers: { ...json, authorization: `Bearer ${API_KEY}`, 'x-stainless-os': 'Linux' }, body: chatBody() });
  expect(served).toMatchObject({ ok: true, status: 200 });
  expect(served.requestId).toMatch(/^req_[0-9a-f]{32}$/); // exposed to the page
  const completion = JSON.parse(served.body!);
  expectSpec('CreateChatCompletionResponse', completion);
  expect(completion.choices[0].message.content.length).toBeGreaterThan(0);

  const refused = await pageFetch(page, `${keyed.head.url}v1/chat/completions`, { method: 'POST', headers: json, body: chatBody() });
  expect(refused).toMatchObject({ ok: true, status: 401 });
  const error = JSON.parse(refused.body!);
  expectSpec('ErrorResponse', error);
  expect(error.error.code).toBe('invalid_api_key');

  const models = await pageFetch(page, `${keyed.head.url}v1/models`, { headers: { authorization: `Bearer ${API_KEY}` } });
  expect(models.status).toBe(200);
  expectSpec('ListModelsResponse', JSON.parse(models.body!));
});

test('without a key: chat, a stream and /v1/responses from the listed origin', async ({ page }) => {
  await page.goto(`http://127.0.0.1:${appPort}/`);
  const whole = await pageFetch(page, `${open.head.url}v1/chat/completions`, { method: 'POST', headers: json, body: chatBody() });
  expect(whole.status).toBe(200);
  expectSpec('CreateChatCompletionResponse', JSON.parse(whole.body!));

  const streamed = await pageFetch(page, `${open.head.url}v1/completions`, { method: 'POST', headers: json, body: JSON.stringify({ model: 'stories260k', prompt: [1], max_tokens: 4, stream: true }) });
  expect(streamed.status).toBe(200);
  const data = streamed.body!.split('\n\n').filter((b) => b.startsWith('data: ')).map((b) => b.slice(6));
  expect(data.at(-1)).toBe('[DONE]');
  for (const chunk of data.slice(0, -1)) expectSpec(COMPLETION_STREAM_CHUNK, JSON.parse(chunk));

  const response = await pageFetch(page, `${open.head.url}v1/responses`, { method: 'POST', headers: { ...json, 'x-request-id': 'page-trace-1' }, body: JSON.stringify({ model: 'stories260k', input: 'hi', max_output_tokens: 4 }) });
  expect(response).toMatchObject({ status: 200, requestId: 'page-trace-1' });
  expectSpec('Response', JSON.parse(response.body!));
});

test('a disallowed origin: the page cannot read the answer, and the head sent no ACAO header', async ({ page }) => {
  await page.goto(`http://localhost:${appPort}/`);
  const blocked = await pageFetch(page, `${open.head.url}v1/chat/completions`, { method: 'POST', headers: json, body: chatBody() });
  expect(blocked.ok).toBe(false);
  expect(blocked.error).toMatch(/Failed to fetch/);
  const simple = await pageFetch(page, `${open.head.url}v1/models`, {}); // no preflight: the browser hides the answer
  expect(simple.ok).toBe(false);
  const direct = await specFetch(`${open.head.url}v1/models`, { headers: { origin: `http://localhost:${appPort}` } });
  expect(direct.headers.get('access-control-allow-origin')).toBeNull();
  const preflight = await specFetch(`${open.head.url}v1/chat/completions`, { method: 'OPTIONS', headers: { origin: `http://localhost:${appPort}`, 'access-control-request-method': 'POST' } });
  expect(preflight.status).toBe(403);
  expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
});
