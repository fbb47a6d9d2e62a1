/**
 * The HTTP edge on a real head with `--api-key`: CORS preflights pass without the key, CORS
 * headers on answers (401s included) for allowed origins only, `x-request-id` echoed or made,
 * `x-accel-buffering: no` on SSE. Raw `fetch` sends what a browser would (`Origin`, preflight
 * headers); Node's fetch does not enforce CORS, so the headers themselves are checked here and
 * the browser's enforcement in test/e2e/cors.spec.ts.
 */
import path from 'node:path';
import { Ollama } from 'ollama';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { tempDir } from '../engine/harness.ts';
import { specFetch } from '../openapi/spec-fetch.ts';
import { clientFor, serveStories } from './api-harness.ts';

const API_KEY = 'sk-edge-test';
const LOCAL_APP = 'http://localhost:5173';
const OTHER_APP = 'https://app.example.com';

let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead; // default --cors
let listed: ServingHead; // --cors https://app.example.com
let url: (s: ServingHead, rest: string) => string;

beforeAll(async () => {
  home = await tempDir('api-edge');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  serving = await serveStories({ apiKey: API_KEY });
  listed = await serveStories({ cors: OTHER_APP });
  url = (s, rest) => `${s.head.url}${rest}`;
});

afterAll(async () => {
  await serving?.close();
  await listed?.close();
  await home?.remove();
});

const preflight = (s: ServingHead, origin: string, path = 'v1/chat/completions') =>
  specFetch(url(s, path), {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,x-stainless-os,openai-project' },
  });
const body = JSON.stringify({ model: 'stories260k', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });

describe('preflight', () => {
  it('passes without the key for an allowed origin: 204, the asked headers, no credentials', async () => {
    const response = await preflight(serving, LOCAL_APP);
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe(LOCAL_APP);
    expect(response.headers.get('access-control-allow-methods')).toBe('GET, POST, OPTIONS');
    expect(response.headers.get('access-control-allow-headers')).toBe('authorization,content-type,x-stainless-os,openai-project');
    expect(response.headers.get('access-control-max-age')).toBe('600');
    expect(response.headers.get('access-control-allow-credentials')).toBeNull();
    expect(response.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{32}$/);
    expect(await response.text()).toBe('');
  });

  it('is answered on any path the browser may call, /api and /health too', async () => {
    for (const path of ['v1/models', 'v1/responses', 'api/state', 'health']) expect((await preflight(serving, LOCAL_APP, path)).status).toBe(204);
  });

  it('refuses a disallowed origin with 403 and no CORS header', async () => {
    const response = await preflight(serving, 'http://evil.example');
    expect(response.status).toBe(403);
    expect(response.headers.get('access-control-allow-origin')).toBeNull();
    expect(await response.json()).toMatchObject({ error: { code: 'origin_not_allowed', type: 'invalid_request_error' } });
  });

  it('a plain OPTIONS (no Origin) is not a preflight and still needs the key', async () => {
    expect((await specFetch(url(serving, 'v1/models'), { method: 'OPTIONS' })).status).toBe(401);
  });

  it('--cors lists exactly its origins (plus the head itself)', async () => {
    expect((await preflight(listed, OTHER_APP)).headers.get('access-control-allow-origin')).toBe(OTHER_APP);
    expect((await preflight(listed, LOCAL_APP)).status).toBe(403);
    const own = listed.head.url.replace(/\/$/, '');
    expect((await preflight(listed, own)).headers.get('access-control-allow-origin')).toBe(own);
  });
});

describe('CORS on answers', () => {
  it('a 401 carries ACAO so the page can read it; the keyed request succeeds', async () => {
    const refused = await specFetch(url(serving, 'v1/chat/completions'), { method: 'POST', headers: { origin: LOCAL_APP, 'content-type': 'application/json' }, body });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('access-control-allow-origin')).toBe(LOCAL_APP);
    expect(refused.headers.get('access-control-expose-headers')).toBe('x-request-id, retry-after');
    expect(refused.headers.get('vary')).toBe('Origin, Accept-Encoding'); // a JSON answer varies with Accept-Encoding (gzip)
    const served = await specFetch(url(serving, 'v1/chat/completions'), {
      method: 'POST',
      headers: { origin: LOCAL_APP, 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body,
    });
    expect(served.status).toBe(200);
    expect(served.headers.get('access-control-allow-origin')).toBe(LOCAL_APP);
    expect(served.headers.get('access-control-allow-credentials')).toBeNull();
    expect((await served.json()).object).toBe('chat.completion');
  });

  it('a disallowed origin gets its answer without any CORS header (the browser hides it)', async () => {
    const response = await specFetch(url(serving, 'v1/models'), { headers: { origin: 'http://evil.example', authorization: `Bearer ${API_KEY}` } });
    expect(response.status).toBe(200);
    expect([...response.headers.keys()].filter((h) => h.startsWith('access-control-'))).toEqual([]);
  });
});

describe('x-request-id', () => {
  it('echoes a client id on success, on errors and through the openai client', async () => {
    const own = await specFetch(url(serving, 'v1/models'), { headers: { 'x-request-id': 'client-trace-42', authorization: `Bearer ${API_KEY}` } });
    expect(own.headers.get('x-request-id')).toBe('client-trace-42');
    const refused = await specFetch(url(serving, 'v1/models'), { headers: { 'x-request-id': 'client-trace-43' } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('x-request-id')).toBe('client-trace-43');
    const { response } = await clientFor(serving, API_KEY).models.list().withResponse();
    expect(response.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{32}$/);
  });

  it('replaces an oversized or odd client id', async () => {
    for (const sent of ['x'.repeat(500), 'a b', '"quoted"']) {
      const response = await specFetch(url(serving, 'health'), { headers: { 'x-request-id': sent } });
      expect(response.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{32}$/);
    }
  });

  it('differs per request, also on unknown paths and the dashboard', async () => {
    const ids = await Promise.all(['health', 'nothing/here', 'dashboard', 'metrics'].map(async (p) => (await specFetch(url(listed, p))).headers.get('x-request-id')));
    expect(new Set(ids).size).toBe(4);
  });
});

describe('SSE', () => {
  it('streams carry x-accel-buffering: no (the API and /api/events)', async () => {
    const stream = await specFetch(url(serving, 'v1/chat/completions'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ model: 'stories260k', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream: true }),
    });
    expect(stream.headers.get('x-accel-buffering')).toBe('no');
    await stream.text();
    const events = await specFetch(url(serving, 'api/events'), { headers: { authorization: `Bearer ${API_KEY}` } });
    expect(events.headers.get('x-accel-buffering')).toBe('no');
    await events.body!.cancel();
  });
});

describe('hostile edge headers: never a 500', () => {
  const origins = ['null', 'http://[', 'http://localhost:99999', 'javascript:alert(1)', `http://${'a'.repeat(8000)}.example`, 'http://localhost:5173/path', 'http://user:pw@localhost:5173', '*'];

  it.each(origins)('Origin %s: preflight 403, answer without CORS headers', async (origin) => {
    const pre = await preflight(serving, origin);
    expect(pre.status).toBe(403);
    expect(pre.headers.get('access-control-allow-origin')).toBeNull();
    const answer = await specFetch(url(serving, 'v1/models'), { headers: { origin, authorization: `Bearer ${API_KEY}` } });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('a huge or malformed Access-Control-Request-Headers falls back to the fixed list', async () => {
    for (const asked of ['x-a,'.repeat(3000), 'a b c', '(),;']) {
      const response = await specFetch(url(serving, 'v1/models'), { method: 'OPTIONS', headers: { origin: LOCAL_APP, 'access-control-request-method': 'GET', 'access-control-request-headers': asked } });
      expect(response.status).toBe(204);
      expect(response.headers.get('access-control-allow-headers')).toBe('authorization, content-type, x-request-id, openai-organization, openai-project, openai-beta');
    }
  });
});

describe("Ollama's API under the same key and CORS rules", () => {
  it('preflights pass; without the key a 401 in Ollama\'s shape (the dashboard API keeps OpenAI\'s)', async () => {
    for (const path of ['api/chat', 'api/generate', 'api/tags']) expect((await preflight(serving, LOCAL_APP, path)).status, path).toBe(204);
    const refused = await fetch(url(serving, 'api/tags'));
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({ error: 'Incorrect API key provided.' });
    expect(await (await fetch(url(serving, 'api/state'))).json()).toMatchObject({ error: { code: 'invalid_api_key' } });
    const wrong = await new Ollama({ host: url(serving, '').replace(/\/$/, ''), headers: { authorization: 'Bearer nope' } }).list().catch((e: unknown) => e);
    expect(wrong).toMatchObject({ name: 'ResponseError', status_code: 401, error: 'Incorrect API key provided.' });
  });

  it('the ollama client with the bearer key lists and chats; an allowed page may read the answer', async () => {
    const client = new Ollama({ host: url(serving, '').replace(/\/$/, ''), headers: { authorization: `Bearer ${API_KEY}` } });
    expect((await client.list()).models.map((m) => m.name)).toEqual(['stories260k:latest']);
    const chat = await fetch(url(serving, 'api/chat'), {
      method: 'POST',
      headers: { origin: LOCAL_APP, authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stories260k', messages: [{ role: 'user', content: 'hi' }], options: { num_predict: 2 } }),
    });
    expect(chat.status).toBe(200);
    expect(chat.headers.get('access-control-allow-origin')).toBe(LOCAL_APP);
    expect(chat.headers.get('content-type')).toBe('application/x-ndjson');
    expect((await chat.text()).trim().split('\n').map((line) => JSON.parse(line) as { done: boolean }).at(-1)?.done).toBe(true);
  });
});
