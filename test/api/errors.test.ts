/**
 * Every refusal of the OpenAI API, with its status and OpenAI's error shape, through the
 * official client (APIError) and raw fetch where the client cannot send the bad request:
 * 400, 401, 404, 413, 429, 503. Then the operations endpoints on the same heads.
 */
import path from 'node:path';
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { localShardLoader } from '../../src/node/local-shard-loader.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { tempDir } from '../engine/harness.ts';
import { clientFor, eventually, GatedLink, postRaw, readSseEvents, serveStories, thrown } from './api-harness.ts';
import { specFetch } from '../openapi/spec-fetch.ts';

const API_KEY = 'sk-meshnet-test';
const BODY_LIMIT = 4096;

let home: { dir: string; remove: () => Promise<void> };
let guarded: ServingHead; // apiKey, small body limit, every layer on the head
let bare: ServingHead; // headLayers 'none', one session at most; peers added by the tests
let client: OpenAI;
let bareClient: OpenAI;
let peer: ShardPeer | undefined;

beforeAll(async () => {
  home = await tempDir('api-errors');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  guarded = await serveStories({ apiKey: API_KEY, bodyLimitBytes: BODY_LIMIT });
  // A gated peer below holds a frame while the test runs: the deadline's floor is the ceiling here.
  bare = await serveStories({ headLayers: 'none', maxSessions: 1, hopFloorMs: 5000 });
  client = clientFor(guarded, API_KEY);
  bareClient = clientFor(bare);
});

afterAll(async () => {
  await guarded?.close();
  await bare?.close();
  await peer?.dispose();
  await home?.remove();
});

const model = 'stories260k';
const v1 = (serving: ServingHead, rest: string) => `${serving.head.url}v1/${rest}`;
const auth = { authorization: `Bearer ${API_KEY}` };

/** The thrown value as the client's APIError, with the OpenAI error body checked for its four keys. */
function apiError(error: unknown, status: number): APIError {
  expect(error).toBeInstanceOf(APIError);
  const api = error as APIError;
  expect(api.status).toBe(status);
  expect(Object.keys(api.error as object).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(typeof (api.error as { message: unknown }).message).toBe('string');
  return api;
}

/** A raw response body in OpenAI's error shape. */
function errorBody(json: unknown): { message: string; type: string; param: string | null; code: string | null } {
  expect(Object.keys(json as object)).toEqual(['error']);
  const error = (json as { error: { message: string; type: string; param: string | null; code: string | null } }).error;
  expect(Object.keys(error).sort()).toEqual(['code', 'message', 'param', 'type']);
  return error;
}

describe('400 invalid request', () => {
  it('malformed JSON', async () => {
    const { status, json } = await postRaw(v1(guarded, 'chat/completions'), '{"model": "stories260k", "messages": [', auth);
    expect(status).toBe(400);
    expect(errorBody(json)).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json', param: null });
  });

  it('a tool schema nested too deep, and JSON on a vocabulary that cannot spell it', async () => {
    let deep: Record<string, unknown> = { type: 'object' };
    for (let i = 0; i < 70; i++) deep = { type: 'object', properties: { a: deep } };
    const messages = [{ role: 'user' as const, content: 'hi' }];
    const tooDeep = apiError(await thrown(() => client.chat.completions.create({ model, messages, tools: [{ type: 'function', function: { name: 'f', parameters: deep } }] })), 400);
    expect(tooDeep).toMatchObject({ param: 'tools[0].function.parameters', code: 'invalid_schema' });
    // stories260k's word-level vocabulary has no token for '{': refused before the session starts.
    const noJson = apiError(await thrown(() => client.chat.completions.create({ model, messages, response_format: { type: 'json_object' } })), 400);
    expect(noJson).toMatchObject({ param: 'response_format', code: 'unsupported_value' });
  });

  it('a wrong type: temperature "hot"', async () => {
    const error = apiError(
      await thrown(() => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], temperature: 'hot' as unknown as number })),
      400,
    );
    expect(error.type).toBe('invalid_request_error');
    expect(error.param).toBe('temperature');
    expect(error.code).toBe('invalid_type');
    expect(error.message).toMatch(/temperature/);
  });

  it('an out-of-range value: top_p 0', async () => {
    const error = apiError(await thrown(() => client.completions.create({ model, prompt: [1], top_p: 0 })), 400);
    expect(error.param).toBe('top_p');
  });

  it('n: 2 is refused clearly', async () => {
    const error = apiError(await thrown(() => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], n: 2 })), 400);
    expect(error.param).toBe('n');
    expect(error.type).toBe('invalid_request_error');
  });

  it('two prompts are refused', async () => {
    const error = apiError(await thrown(() => client.completions.create({ model, prompt: ['one', 'two'] })), 400);
    expect(error.param).toBe('prompt');
  });

  it('a missing model and missing messages', async () => {
    const noModel = apiError(await thrown(() => client.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] } as never)), 400);
    expect(noModel.param).toBe('model');
    const noMessages = apiError(await thrown(() => client.chat.completions.create({ model } as never)), 400);
    expect(noMessages.param).toBe('messages');
  });

  it('max_tokens beyond the context', async () => {
    const error = apiError(await thrown(() => client.completions.create({ model, prompt: [1], max_tokens: 1_000_000 })), 400);
    expect(error.param).toMatch(/max_tokens|prompt/);
  });

  it('prompt token ids outside the vocabulary', async () => {
    const error = apiError(await thrown(() => client.completions.create({ model, prompt: [1, 1_000_000] })), 400);
    expect(error.param).toMatch(/^prompt/);
  });
});

describe('401 with an API key configured', () => {
  it('a wrong key', async () => {
    const error = apiError(await thrown(() => clientFor(guarded, 'wrong').chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] })), 401);
    expect(error.code).toBe('invalid_api_key');
    expect(error.type).toBe('invalid_request_error');
    expect(error.message).not.toContain('wrong');
  });

  it('no key at all, on /v1 and /api', async () => {
    const models = await specFetch(v1(guarded, 'models'));
    expect(models.status).toBe(401);
    expect(errorBody(await models.json()).code).toBe('invalid_api_key');
    expect((await specFetch(`${guarded.head.url}api/state`)).status).toBe(401);
    expect((await specFetch(`${guarded.head.url}api/state?key=${API_KEY}`)).status).toBe(200);
  });

  it('the right key is served', async () => {
    const completion = await client.completions.create({ model, prompt: [1], max_tokens: 2, temperature: 0 });
    expect(completion.choices[0].text).toBe('t461 t461');
  });

  it('/health, /health/live and /metrics stay open', async () => {
    expect((await specFetch(`${guarded.head.url}health`)).status).toBe(200);
    expect((await specFetch(`${guarded.head.url}health/live`)).status).toBe(200);
    expect((await specFetch(`${guarded.head.url}metrics`)).status).toBe(200);
  });
});

describe('404', () => {
  it('an unknown model', async () => {
    const error = apiError(await thrown(() => client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] })), 404);
    expect(error.code).toBe('model_not_found');
    expect(error.param).toBe('model');
    expect(error.message).toContain('gpt-4o');
    apiError(await thrown(() => client.completions.create({ model: 'gpt-4o', prompt: 'x' })), 404);
    apiError(await thrown(() => client.models.retrieve('gpt-4o')), 404);
  });

  it('an unknown path', async () => {
    const { status, json } = await postRaw(v1(guarded, 'embeddings'), JSON.stringify({ model, input: 'x' }), auth);
    expect(status).toBe(404);
    expect(errorBody(json)).toMatchObject({ type: 'invalid_request_error', message: 'Invalid URL (POST /v1/embeddings)' });
    const outside = await specFetch(`${guarded.head.url}nothing/here`, { headers: auth });
    expect(outside.status).toBe(404);
    errorBody(await outside.json());
    // Default-deny: without the key an unknown path is a 401, like every route off the open list.
    expect((await specFetch(`${guarded.head.url}nothing/here`)).status).toBe(401);
  });
});

describe('413 body too large', () => {
  const big = JSON.stringify({ model, prompt: 'x'.repeat(BODY_LIMIT * 2) });

  it('with a content-length', async () => {
    const { status, json } = await postRaw(v1(guarded, 'completions'), big, auth);
    expect(status).toBe(413);
    expect(errorBody(json)).toMatchObject({ type: 'invalid_request_error', code: 'request_too_large' });
  });

  it('streamed without a content-length', async () => {
    const bytes = new TextEncoder().encode(big);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 1024) controller.enqueue(bytes.slice(i, i + 1024));
        controller.close();
      },
    });
    const response = await specFetch(v1(guarded, 'completions'), { method: 'POST', headers: { 'content-type': 'application/json', ...auth }, body, duplex: 'half' } as RequestInit);
    expect(response.status).toBe(413);
    expect(errorBody(await response.json()).code).toBe('request_too_large');
  });

  it('through the client', async () => {
    const error = apiError(await thrown(() => client.completions.create({ model, prompt: 'x'.repeat(BODY_LIMIT * 2) })), 413);
    expect(error.code).toBe('request_too_large');
  });
});

describe('503 and 429 on a head without layers', () => {
  it('503 when no route can serve (no peers), streaming or not', async () => {
    const error = apiError(await thrown(() => bareClient.completions.create({ model, prompt: [1], max_tokens: 2 })), 503);
    expect(error.type).toBe('server_error');
    expect(error.code).toBe('route_unavailable');
    expect(error.headers?.get('retry-after')).toBe('5');
    const streamed = apiError(await thrown(() => bareClient.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], stream: true })), 503);
    expect(streamed.code).toBe('route_unavailable');
    expect(streamed.headers?.get('retry-after')).toBe('5');
    expect(bare.tracker.liveSessions).toBe(0);
    // Readiness says so too (503 with the planner's reason); liveness stays 200.
    const response = await specFetch(`${bare.head.url}health`);
    expect(response.status).toBe(503);
    const health = await response.json();
    expect(health).toMatchObject({ status: 'unavailable', ready: false, route: { ready: false } });
    expect(health.reason).toMatch(/^route unavailable: /);
    expect(health.reason).toBe(`route unavailable: ${health.route.reason.replace(/^route unavailable: /, '')}`);
    expect(await (await specFetch(`${bare.head.url}health/live`)).json()).toEqual({ status: 'ok' });
  });

  it('429 while the only session slot is held by an open stream; served again once it ends', async () => {
    peer = new ShardPeer({ loader: localShardLoader(bare.head.model, { device: 'cpu', threads: 1 }), memoryBudgetBytes: 1 << 30 });
    const gated = new GatedLink(new InProcessLink(peer), 3 + 2); // 2: its warm-up frames
    bare.head.mesh.addPeer({ id: 'p1', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: gated });

    const stream = await bareClient.completions.create({ model, prompt: [1], max_tokens: 16, temperature: 0, stream: true });
    const chunks = stream[Symbol.asyncIterator]();
    let text = '';
    for (let i = 0; i < 2; i++) text += (await chunks.next()).value!.choices[0].text;
    expect(bare.tracker.liveSessions).toBe(1);

    const error = apiError(await thrown(() => bareClient.completions.create({ model, prompt: [1], max_tokens: 2 })), 429);
    expect(error.type).toBe('requests');
    expect(error.code).toBe('rate_limit_exceeded');
    expect(error.headers?.get('retry-after')).toBe('1');

    gated.release();
    for (let next = await chunks.next(); !next.done; next = await chunks.next()) text += next.value.choices[0]?.text ?? '';
    expect(text.split(' ')).toHaveLength(16);
    expect(await eventually(() => bare.tracker.liveSessions === 0)).toBe(true);
    const after = await bareClient.completions.create({ model, prompt: [1], max_tokens: 2, temperature: 0 });
    expect(after.choices[0].text).toBe('t461 t461');
  });
});

describe('operations endpoints', () => {
  it('/health answers 200 with readiness and peers', async () => {
    const response = await specFetch(`${guarded.head.url}health`);
    expect(response.status).toBe(200);
    const health = await response.json();
    expect(health).toMatchObject({ status: 'ok', model, ready: true, minPeers: 0, route: { ready: true } });
    expect(health.reason).toBeUndefined();
    expect(health.route.hops).toEqual([{ peerId: 'head', range: [0, 5] }]);
    expect(health.peers.map((p: { id: string }) => p.id)).toEqual(['head']);
  });

  it('/metrics counts requests by status, with the statuses seen', async () => {
    const text = await (await specFetch(`${guarded.head.url}metrics`)).text();
    for (const status of ['200', '400', '401', '404', '413']) {
      expect(text).toMatch(new RegExp(`^meshnet_requests_total\\{[^}]*status="${status}"[^}]*\\} [1-9]`, 'm'));
    }
    expect(text).toMatch(/^meshnet_requests_total\{[^}]*endpoint="\/v1\/completions"/m);
    expect(text).toMatch(/^meshnet_requests_total\{endpoint="unknown",status="404"\} [1-9]/m);
    expect(text).toMatch(/^meshnet_tokens_total\{direction="out"\} [1-9]/m);
    expect(text).toMatch(/^meshnet_live_sessions 0$/m);
    expect(text).toMatch(/^meshnet_time_to_first_token_seconds_bucket/m);
    const bareText = await (await specFetch(`${bare.head.url}metrics`)).text();
    for (const status of ['200', '429', '503']) expect(bareText).toMatch(new RegExp(`^meshnet_requests_total\\{[^}]*status="${status}"`, 'm'));
  });

  it('/api/state has the model, peers, route and finished sessions', async () => {
    const response = await specFetch(`${guarded.head.url}api/state`, { headers: auth });
    expect(response.status).toBe(200);
    const state = await response.json();
    expect(state.model).toEqual({ id: model, numLayers: 5, dtype: 'fp32', weights: 'fp32' });
    expect(state.peers.map((p: { id: string }) => p.id)).toEqual(['head']);
    expect(state.route.hops).toEqual([{ peerId: 'head', range: { start: 0, end: 5 } }]);
    expect(state.finished.length).toBeGreaterThan(0);
    expect(state.finished[0].id).toMatch(/^(chatcmpl|cmpl)-/);
    const bareState = await (await specFetch(`${bare.head.url}api/state`)).json();
    expect(bareState.peers.map((p: { id: string }) => p.id)).toEqual(['p1']);
  });

  it('/api/events sends a snapshot event first', async () => {
    const response = await specFetch(`${guarded.head.url}api/events`, { headers: auth });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const [first] = await readSseEvents(response, (events) => events.length >= 1);
    expect(first.event).toBe('snapshot');
    const snapshot = JSON.parse(first.data);
    expect(snapshot.kind).toBe('snapshot');
    expect(snapshot.state.model.id).toBe(model);
  });

  it('/api/events then sends session events as requests run', async () => {
    const response = await specFetch(`${guarded.head.url}api/events?key=${API_KEY}`);
    const reading = readSseEvents(response, (events) => events.some((e) => e.event === 'session.finished'));
    await new Promise((resolve) => setTimeout(resolve, 50));
    await client.completions.create({ model, prompt: [1], max_tokens: 4, temperature: 0 });
    const kinds = (await reading).map((e) => e.event);
    expect(kinds[0]).toBe('snapshot');
    expect(kinds).toContain('session.started');
    expect(kinds).toContain('session.finished');
  }, 20_000);
});
