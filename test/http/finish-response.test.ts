/**
 * What every response of a real head carries on the wire (finish-response.ts), read with
 * node:http (which neither adds `accept-encoding` nor decodes): a reason phrase on the status
 * line, and gzip of whole JSON bodies only when the request asks for it.
 */
import http from 'node:http';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acceptsGzip, GZIP_MIN_BYTES } from '../../src/node/net/finish-response.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { serveStories } from '../api/api-harness.ts';
import { tempDir } from '../engine/harness.ts';

interface Raw {
  readonly status: number;
  readonly reason: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

function send(base: string, method: string, route: string, headers: Record<string, string>, body?: unknown): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const request = http.request(new URL(route, base), { method, headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers } }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode!, reason: response.statusMessage!, headers: response.headers, body: Buffer.concat(chunks) }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

describe('acceptsGzip', () => {
  it('reads q-values and the wildcard', () => {
    expect(acceptsGzip(null)).toBe(false);
    expect(acceptsGzip('gzip')).toBe(true);
    expect(acceptsGzip('br, gzip;q=0.5, deflate')).toBe(true);
    expect(acceptsGzip('GZip ; Q=1')).toBe(true);
    expect(acceptsGzip('gzip;q=0')).toBe(false);
    expect(acceptsGzip('gzip;q=0.000, *')).toBe(false);
    expect(acceptsGzip('identity')).toBe(false);
    expect(acceptsGzip('*')).toBe(true);
    expect(acceptsGzip('*;q=0')).toBe(false);
    expect(acceptsGzip('br')).toBe(false);
  });
});

describe('on a real head', () => {
  let home: { dir: string; remove: () => Promise<void> };
  let serving: ServingHead;
  const chat = () => ({ model: serving.modelId, messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 8, seed: 1 });
  beforeAll(async () => {
    home = await tempDir('finish-response');
    process.env.MESHNET_HOME = path.join(home.dir, 'home');
    serving = await serveStories();
  });
  afterAll(async () => {
    await serving?.close();
    await home?.remove();
  });

  it('every status line has its reason phrase', async () => {
    const base = serving.head.url;
    expect(await send(base, 'GET', '/v1/models', {})).toMatchObject({ status: 200, reason: 'OK' });
    expect(await send(base, 'GET', '/v1/nothing-here', {})).toMatchObject({ status: 404, reason: 'Not Found' });
    expect(await send(base, 'POST', '/v1/chat/completions', {}, { model: serving.modelId })).toMatchObject({ status: 400, reason: 'Bad Request' });
    const streamed = await send(base, 'POST', '/v1/chat/completions', {}, { ...chat(), stream: true });
    expect(streamed).toMatchObject({ status: 200, reason: 'OK' });
  });

  it('a whole JSON answer is gzipped when asked, and the same JSON', async () => {
    const base = serving.head.url;
    const plain = await send(base, 'POST', '/v1/chat/completions', {}, chat());
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers.vary).toContain('Accept-Encoding');
    expect(plain.body.byteLength).toBeGreaterThanOrEqual(GZIP_MIN_BYTES);
    const packed = await send(base, 'POST', '/v1/chat/completions', { 'accept-encoding': 'gzip, deflate' }, chat());
    expect(packed.headers['content-encoding']).toBe('gzip');
    expect(Number(packed.headers['content-length'])).toBe(packed.body.byteLength);
    const unpacked = JSON.parse(gunzipSync(packed.body).toString('utf8')) as { choices: unknown[] };
    const original = JSON.parse(plain.body.toString('utf8')) as { choices: unknown[] };
    expect(unpacked.choices).toEqual(original.choices); // seeded: the same answer
    expect((await send(base, 'POST', '/v1/chat/completions', { 'accept-encoding': 'gzip;q=0' }, chat())).headers['content-encoding']).toBeUndefined();
  });

  it('streams and small bodies are never compressed', async () => {
    const base = serving.head.url;
    const streamed = await send(base, 'POST', '/v1/chat/completions', { 'accept-encoding': 'gzip' }, { ...chat(), stream: true });
    expect(streamed.headers['content-encoding']).toBeUndefined();
    expect(streamed.body.toString('utf8')).toContain('data: [DONE]');
    const small = await send(base, 'GET', '/health/live', { 'accept-encoding': 'gzip' });
    expect(small).toMatchObject({ status: 200, reason: 'OK' });
    expect(small.body.byteLength).toBeLessThan(GZIP_MIN_BYTES);
    expect(small.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(small.body.toString('utf8'))).toEqual({ status: 'ok' });
  });
});
