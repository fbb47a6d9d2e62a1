/**
 * `--api-key` is default-deny and cannot be bypassed by how the path is spelled. Over real
 * HTTP with the request target sent byte for byte: every guarded route, under percent-
 * encodings (`%76`, uppercase hex, `%2F`), dot segments (`..`, `%2e%2e`, also behind an open
 * prefix such as `/health/..`), double slashes, case, trailing dots and slashes, backslashes
 * and double encoding → 401 without the key; with the key the same request gets what the
 * router answers for it: 200 and the same body as the plain path when it names the same
 * route, 404 when it names none. Then the key's own spellings (`?key=` variants, header,
 * cookie), and every route of the open list stays open.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPEN_ROUTES } from '../../src/node/http/auth.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { tempDir } from '../engine/harness.ts';
import { serveStories } from '../api/api-harness.ts';
import { jsonOf, rawRequest, type RawRequest, type RawResponse } from './raw-http.ts';
import { RawSocket } from '../transport/transport-harness.ts';
import { PROTOCOL_VERSION } from '../../src/shared/protocol.ts';

const API_KEY = 'sk-path-test-Key_1';
const JOIN_TOKEN = 'join-token-for-path-tests';
const MODEL = 'stories260k';

let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;

beforeAll(async () => {
  home = await tempDir('api-key-paths');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  serving = await serveStories({ apiKey: API_KEY, joinToken: JOIN_TOKEN });
});

afterAll(async () => {
  await serving?.close();
  await home?.remove();
});

const send = (target: string, options: RawRequest = {}) => rawRequest(serving.head.url, target, options);
const withKey = (options: RawRequest = {}): RawRequest => ({ ...options, headers: { ...options.headers, authorization: `Bearer ${API_KEY}` } });

interface GuardedRoute {
  readonly path: string;
  readonly method: 'GET' | 'POST';
  readonly body?: string;
  readonly headersOnly?: boolean;
  /** What must hold for two 200 answers to be "the same" (volatile fields left out). */
  readonly same: (response: RawResponse) => unknown;
}

const text = (response: RawResponse) => response.body;
const completionText = (response: RawResponse) => (jsonOf(response) as { choices: { text: string }[] }).choices[0]!.text;
const chatText = (response: RawResponse) => (jsonOf(response) as { choices: { message: { content: string } }[] }).choices[0]!.message.content;

const GUARDED: readonly GuardedRoute[] = [
  { path: '/v1/models', method: 'GET', same: text },
  { path: `/v1/models/${MODEL}`, method: 'GET', same: text },
  { path: '/v1/completions', method: 'POST', body: JSON.stringify({ model: MODEL, prompt: [1], max_tokens: 3, temperature: 0 }), same: completionText },
  {
    path: '/v1/chat/completions',
    method: 'POST',
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, temperature: 0 }),
    same: chatText,
  },
  { path: '/api/state', method: 'GET', same: (r) => Object.keys(jsonOf(r) as object).sort() },
  { path: '/api/events', method: 'GET', headersOnly: true, same: (r) => r.headers['content-type'] },
  { path: '/dashboard', method: 'GET', same: text },
  { path: '/dashboard/', method: 'GET', same: text },
  { path: '/dashboard/dashboard.css', method: 'GET', same: text },
];

/** Percent-encode the characters at `positions` of `segment` (lowercase or uppercase hex). */
function encodeAt(segment: string, positions: (i: number) => boolean, upper = false): string {
  return [...segment]
    .map((c, i) => {
      if (!positions(i) || !/[A-Za-z0-9._~-]/.test(c)) return c;
      const hex = c.charCodeAt(0).toString(16).padStart(2, '0');
      return `%${upper ? hex.toUpperCase() : hex}`;
    })
    .join('');
}
const mapSegments = (p: string, f: (segment: string, index: number) => string) =>
  p
    .split('/')
    .map((s, i) => (i === 0 ? s : f(s, i)))
    .join('/');
const rest = (p: string) => p.slice(1); // without the leading slash

/** Spellings that name the same route as `p` (with the key: 200 and the same body). */
function sameRoute(p: string): [string, string][] {
  return [
    ['plain', p],
    ['first letter of each segment as %xx', mapSegments(p, (s) => encodeAt(s, (i) => i === 0))],
    ['every character as %XX', mapSegments(p, (s) => encodeAt(s, () => true, true))],
    ['one escape in the middle', mapSegments(p, (s, i) => (i === 1 ? encodeAt(s, (j) => j === 1) : s))],
    ['/x/../ before it', `/x/../${rest(p)}`],
    ['/x/%2e%2e/ before it', `/x/%2e%2e/${rest(p)}`],
    ['/x/%2E%2E/ before it', `/x/%2E%2E/${rest(p)}`],
    ['/x/.%2e/ before it', `/x/.%2e/${rest(p)}`],
    ['open /health/../ before it', `/health/../${rest(p)}`],
    ['open /health/%2e%2e/ before it', `/health/%2e%2e/${rest(p)}`],
    ['open /peer/%2e%2e/ before it', `/peer/%2e%2e/${rest(p)}`],
    ['open /ort/%2E%2E/ before it', `/ort/%2E%2E/${rest(p)}`],
    ['open /metrics/./../ before it', `/metrics/./../${rest(p)}`],
    ['/./ and /%2e/ segments', `/./%2e/${rest(p)}`],
    ['backslashes for slashes', '/' + rest(p).replaceAll('/', '\\')],
    ...(p.endsWith('/') ? [] : ([['a trailing slash', `${p}/`]] as [string, string][])),
    ['a fragment', `${p}#fragment`],
  ];
}

/** Spellings that name no route (with the key: the router's 404). */
function noRoute(p: string): [string, string][] {
  const inner = p.indexOf('/', 1);
  return [
    ['%2F for a slash', inner > 0 ? `${p.slice(0, inner)}%2F${p.slice(inner + 1)}` : `${p}%2F`],
    ['%2f for a slash after it', `${p}%2fx`],
    ['a leading //', `/${p}`],
    ['an inner //', inner > 0 ? `${p.slice(0, inner)}/${p.slice(inner)}` : `${p}//x`],
    ['the first letter upper-case', `/${p[1]!.toUpperCase()}${p.slice(2)}`],
    ['an upper-case letter as %XX', `/${encodeAt(p[1]!.toUpperCase(), () => true, true)}${p.slice(2)}`],
    ['everything upper-case', p.toUpperCase()],
    ['a trailing dot', p.endsWith('/') ? `${p.slice(0, -1)}./` : `${p}.`],
    ['a dot after the first segment', inner > 0 ? `${p.slice(0, inner)}.${p.slice(inner)}` : `${p}./x`],
    ['double-encoded first letter', `/%25${p.charCodeAt(1).toString(16)}${p.slice(2)}`],
    ['double-encoded dot segment', `/x/%252e%252e/${rest(p)}`],
    ['an encoded NUL at the end', `${p}%00`],
    ['a ;key= path parameter', `${p};key=${API_KEY}`],
  ];
}

function expectUnauthorized(response: RawResponse, what: string): void {
  expect(response.status, what).toBe(401);
  expect((jsonOf(response) as { error?: { code?: string } })?.error?.code, what).toBe('invalid_api_key');
}

describe('every guarded route under every spelling: 401 without the key, the router\u2019s answer with it', () => {
  for (const route of GUARDED) {
    it(`${route.method} ${route.path}`, async () => {
      const options: RawRequest = { method: route.method, body: route.body, headersOnly: route.headersOnly };
      const reference = await send(route.path, withKey(options));
      expect(reference.status).toBe(200);
      for (const [how, target] of sameRoute(route.path)) {
        const what = `${route.method} ${target} (${how})`;
        expectUnauthorized(await send(target, options), what);
        expectUnauthorized(await send(target, { ...options, headers: { authorization: 'Bearer wrong' } }), `${what}, wrong key`);
        const served = await send(target, withKey(options));
        expect(served.status, `${what} with the key`).toBe(200);
        expect(route.same(served), `${what} with the key`).toEqual(route.same(reference));
      }
      for (const [how, target] of noRoute(route.path)) {
        const what = `${route.method} ${target} (${how})`;
        expectUnauthorized(await send(target, options), what);
        expect((await send(target, withKey(options))).status, `${what} with the key`).toBe(404);
      }
    });
  }

  it('the issue\u2019s own examples: completions through /%76%31/ and /v%31/, /%61pi/, /%64ashboard', async () => {
    const body = JSON.stringify({ model: MODEL, prompt: [1], max_tokens: 3 });
    for (const target of ['/%76%31/completions']) expectUnauthorized(await send(target, { method: 'POST', body }), target);
    const chat = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
    expectUnauthorized(await send('/v%31/chat/completions', { method: 'POST', body: chat }), 'chat');
    for (const target of ['/%61pi/state', '/%61pi/events', '/%64ashboard', '/%76%31/models']) expectUnauthorized(await send(target), target);
  });

  it('a method a route does not have is guarded too (POST and HEAD /health, DELETE /v1/models)', async () => {
    expectUnauthorized(await send('/health', { method: 'POST', body: '{}' }), 'POST /health');
    expectUnauthorized(await send('/v1/models', { method: 'DELETE' }), 'DELETE /v1/models');
    expect((await send('/health', withKey({ method: 'POST', body: '{}' }))).status).toBe(404);
    // h3 sends HEAD to a GET route only when no route takes every method; the 404 catch-all
    // does, so HEAD /health is the catch-all's request, and guarded like it.
    expect((await send('/health', { method: 'HEAD' })).status).toBe(401);
    expect((await send('/health', withKey({ method: 'HEAD' }))).status).toBe(404);
  });

  it('unknown paths are guarded, and 401s are counted under the route, never the raw path', async () => {
    expectUnauthorized(await send('/zz-minted-label-1'), 'unknown path');
    expectUnauthorized(await send('/v1/zz-minted-label-2'), 'unknown /v1 path');
    expect((await send('/zz-minted-label-3', withKey())).status).toBe(404);
    const metrics = (await send('/metrics')).body;
    expect(metrics).toMatch(/^meshnet_requests_total\{endpoint="unknown",status="401"\} [1-9]/m);
    expect(metrics).not.toContain('zz-minted-label');
  });
});

describe('how the key is presented', () => {
  const cases: [string, string, Record<string, string>, number][] = [
    ['Bearer header', '/v1/models', { authorization: `Bearer ${API_KEY}` }, 200],
    ['bearer in lower case', '/v1/models', { authorization: `bearer ${API_KEY}` }, 200],
    ['?key=', `/v1/models?key=${API_KEY}`, {}, 200],
    ['?key= percent-encoded', `/v1/models?key=${encodeAt(API_KEY, () => true)}`, {}, 200],
    ['?key= after another parameter', `/v1/models?x=1&key=${API_KEY}`, {}, 200],
    ['?key= on an encoded path', `/%76%31/models?key=${API_KEY}`, {}, 200],
    ['?key=right&key=wrong (the first counts)', `/v1/models?key=${API_KEY}&key=wrong`, {}, 200],
    ['the cookie', '/v1/models', { cookie: `other=1; meshnet_key=${encodeURIComponent(API_KEY)}` }, 200],
    ['?key=wrong&key=right', `/v1/models?key=wrong&key=${API_KEY}`, {}, 401],
    ['?key= empty', '/v1/models?key=', {}, 401],
    ['?key without a value', '/v1/models?key', {}, 401],
    ['?KEY= (names are case-sensitive)', `/v1/models?KEY=${API_KEY}`, {}, 401],
    ['?key= with a NUL after it', `/v1/models?key=${API_KEY}%00`, {}, 401],
    ['?key= with a space before it', `/v1/models?key=%20${API_KEY}`, {}, 401],
    ['?key= a prefix of the key', `/v1/models?key=${API_KEY.slice(0, -1)}`, {}, 401],
    ['?key= the key and more', `/v1/models?key=${API_KEY}x`, {}, 401],
    ['?key= in another case', `/v1/models?key=${API_KEY.toUpperCase()}`, {}, 401],
    ['?key%3D (an encoded =)', `/v1/models?key%3D${API_KEY}`, {}, 401],
    ['a wrong Bearer header wins over a right ?key=', `/v1/models?key=${API_KEY}`, { authorization: 'Bearer wrong' }, 401],
    ['an empty Bearer header', '/v1/models', { authorization: 'Bearer ' }, 401],
    ['Basic auth', '/v1/models', { authorization: `Basic ${Buffer.from(`x:${API_KEY}`).toString('base64')}` }, 401],
    ["the cookie from the head's own page (Sec-Fetch-Site: same-origin)", '/v1/models', { cookie: `meshnet_key=${encodeURIComponent(API_KEY)}`, 'sec-fetch-site': 'same-origin' }, 200],
    ['the cookie on a typed URL (Sec-Fetch-Site: none)', '/v1/models', { cookie: `meshnet_key=${encodeURIComponent(API_KEY)}`, 'sec-fetch-site': 'none' }, 200],
    ['the cookie from a page on another port of the same host (same-site)', '/v1/models', { cookie: `meshnet_key=${encodeURIComponent(API_KEY)}`, 'sec-fetch-site': 'same-site' }, 401],
    ['the cookie from another site', '/v1/models', { cookie: `meshnet_key=${encodeURIComponent(API_KEY)}`, 'sec-fetch-site': 'cross-site' }, 401],
    ['the cookie with a foreign Origin and no Sec-Fetch-Site', '/v1/models', { cookie: `meshnet_key=${encodeURIComponent(API_KEY)}`, origin: 'http://localhost:3000' }, 401],
    ['the cookie with Origin: null', '/v1/models', { cookie: `meshnet_key=${encodeURIComponent(API_KEY)}`, origin: 'null' }, 401],
    ['a bearer key from another site (cross-origin callers use one)', '/v1/models', { authorization: `Bearer ${API_KEY}`, 'sec-fetch-site': 'cross-site' }, 200],
    ['a malformed cookie escape', '/v1/models', { cookie: 'meshnet_key=%E0%A4%A' }, 401],
    ['the cookie under another name', '/v1/models', { cookie: `Meshnet_key=${API_KEY}` }, 401],
    ['the key as a header of its own', '/v1/models', { 'x-api-key': API_KEY }, 401],
  ];
  for (const [how, target, headers, status] of cases) {
    it(`${how} → ${status}`, async () => {
      const response = await send(target, { headers });
      if (status === 401) expectUnauthorized(response, how);
      else expect(response.status, how).toBe(status);
    });
  }

  it('a ?key= visit to the dashboard (also spelled /%64ashboard) sets the cookie; a guarded API call does not', async () => {
    for (const target of [`/dashboard?key=${API_KEY}`, `/%64ashboard?key=${API_KEY}`]) {
      const response = await send(target);
      expect(response.status).toBe(200);
      expect(String(response.headers['set-cookie'])).toMatch(/^meshnet_key=.*HttpOnly; SameSite=Strict/);
    }
    expect((await send(`/v1/models?key=${API_KEY}`)).headers['set-cookie']).toBeUndefined();
    expect((await send(`/dashboard?key=wrong`)).headers['set-cookie']).toBeUndefined();
  });
});

describe('the open list stays open', () => {
  it('is exactly the documented routes', () => {
    expect([...OPEN_ROUTES].sort()).toEqual(['/artifacts/:key/:part/:file', '/health', '/health/live', '/metrics', '/ort/:file', '/peer', '/peer/app.js', '/peer/dashboard.css', '/peer/peer.css', '/peer/ws'].sort());
  });

  it('/health, /health/live, /metrics, the join page and its files answer 200 without a key, however spelled', async () => {
    const targets = [
      '/health',
      '/health/',
      '/%68ealth',
      '/x/../health',
      '/health/live',
      '/health/%6Cive',
      '/metrics',
      '/peer',
      '/peer/app.js',
      '/peer/dashboard.css',
      '/peer/peer.css',
      '/ort/ort-wasm-simd-threaded.wasm',
    ];
    for (const target of targets) expect((await send(target)).status, target).toBe(200);
    expect(jsonOf(await send('/health/live'))).toEqual({ status: 'ok' });
  });

  it('artifacts skip the API key but keep their own join-token check (header only, never ?token=)', async () => {
    const artifact = `/artifacts/${serving.head.model.key}/layers-0-1-fp32-fp32/manifest.json`;
    expect((await send(artifact, { headers: { 'x-meshnet-token': JOIN_TOKEN } })).status).toBe(200);
    for (const response of [await send(artifact), await send(`${artifact}?token=${JOIN_TOKEN}`), await send(artifact, { headers: { 'x-meshnet-token': 'wrong' } })]) {
      expect(response.status).toBe(401);
      expect((jsonOf(response) as { error: { type: string } }).error.type).toBe('artifact_error');
    }
  });

  it('/peer/ws upgrades without a key; its own join-token check answers the hello', async () => {
    const socket = await RawSocket.open(serving.head.peerUrl.replace('/peer/ws', '/p%65er/ws'));
    try {
      socket.send(JSON.stringify({ kind: 'hello', id: 'h', protocol: PROTOCOL_VERSION, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 20, peerId: 'p', joinToken: 'wrong' }));
      expect(await socket.nextControl()).toMatchObject({ kind: 'error', code: 'unauthorized', message: 'the join token is wrong' });
    } finally {
      socket.close();
    }
  });

  it('a CORS preflight passes the key check (answered by the CORS edge: 204, or 403 for an origin --cors does not allow); a bare OPTIONS does not', async () => {
    const preflight = await send('/v1/chat/completions', { method: 'OPTIONS', headers: { origin: 'http://localhost:5173', 'access-control-request-method': 'POST' } });
    expect(preflight.status).toBe(204);
    const other = await send('/v1/chat/completions', { method: 'OPTIONS', headers: { origin: 'http://example.test', 'access-control-request-method': 'POST' } });
    expect(other.status).toBe(403);
    expectUnauthorized(await send('/v1/chat/completions', { method: 'OPTIONS' }), 'OPTIONS without the preflight headers');
  });
});
