/** Pure parts of the HTTP edge: `--cors` parsing, the origin policy, preflight headers, x-request-id. */
import { describe, expect, it } from 'vitest';
import { isPreflight } from '../../src/node/http/auth.ts';
import { CorsOptionError, CorsPolicy, DEFAULT_CORS, EXPOSED_HEADERS, ownOrigins, parseCorsOption } from '../../src/node/http/cors.ts';
import { requestIdFor } from '../../src/node/http/edge-headers.ts';

const own = () => ['http://127.0.0.1:8080'];
const policy = (option: string) => new CorsPolicy(parseCorsOption(option), own);

function preflight(origin: string | undefined, headers: Record<string, string> = {}): Request {
  return new Request('http://127.0.0.1:8080/v1/chat/completions', {
    method: 'OPTIONS',
    headers: { ...(origin === undefined ? {} : { origin }), 'access-control-request-method': 'POST', ...headers },
  });
}

describe('--cors', () => {
  it('parses origins, any-port patterns, * and none', () => {
    expect(parseCorsOption('https://app.example.com, http://localhost:*')).toEqual([
      { kind: 'exact', origin: 'https://app.example.com' },
      { kind: 'any-port', scheme: 'http', host: 'localhost' },
    ]);
    expect(parseCorsOption('*')).toEqual([{ kind: 'any' }]);
    expect(parseCorsOption('none')).toEqual([]);
    expect(parseCorsOption('HTTPS://App.Example.com:8443')).toEqual([{ kind: 'exact', origin: 'https://app.example.com:8443' }]);
    expect(parseCorsOption(DEFAULT_CORS)).toHaveLength(3);
  });

  it.each(['example.com', 'ftp://example.com', 'https://example.com/path', 'https://example.com/', 'https://user@example.com', 'http://*.example.com', 'https://x.com:*8', ',,', 'null'])(
    'refuses %j naming it',
    (entry) => {
      expect(() => parseCorsOption(entry)).toThrow(CorsOptionError);
      if (entry !== ',,') expect(() => parseCorsOption(entry)).toThrow(entry);
    },
  );
});

describe('the origin policy', () => {
  it('allows the head itself and local dev servers by default, nothing else', () => {
    const p = policy(DEFAULT_CORS);
    for (const origin of ['http://127.0.0.1:8080', 'http://localhost:5173', 'http://127.0.0.1:3000', 'http://localhost', 'http://[::1]:8000']) expect(p.allows(origin), origin).toBe(true);
    for (const origin of ['https://localhost:5173', 'http://evil.example', 'http://localhost.evil.example:80', 'http://127.0.0.1.nip.io:3000', 'null', 'http://LOCALHOST:5173', '', 'http://localhost:5173/x'])
      expect(p.allows(origin), origin).toBe(false);
  });

  it('allows exactly the listed origins, and their own port only', () => {
    const p = policy('https://app.example.com');
    expect(p.allows('https://app.example.com')).toBe(true);
    expect(p.allows('https://app.example.com:444')).toBe(false);
    expect(p.allows('http://app.example.com')).toBe(false);
    expect(p.allows('http://localhost:5173')).toBe(false);
    expect(p.allows('http://127.0.0.1:8080')).toBe(true); // its own origin always
  });

  it('* allows any origin with a literal *, and never credentials', () => {
    const p = policy('*');
    expect(p.responseHeaders('https://anything.example')).toEqual({ 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED_HEADERS });
    const headers = p.preflightHeaders(preflight('https://anything.example'))!;
    expect(headers['access-control-allow-origin']).toBe('*');
    expect(Object.keys(headers).some((h) => h.includes('credentials'))).toBe(false);
  });

  it('echoes an allowed origin with Vary: Origin; a disallowed one gets no CORS header', () => {
    const p = policy(DEFAULT_CORS);
    expect(p.responseHeaders('http://localhost:5173')).toEqual({
      'access-control-allow-origin': 'http://localhost:5173',
      'access-control-expose-headers': 'x-request-id, retry-after',
      vary: 'Origin',
    });
    expect(p.responseHeaders('http://evil.example')).toEqual({ vary: 'Origin' });
    expect(p.responseHeaders(null)).toEqual({ vary: 'Origin' });
  });
});

describe('preflight headers', () => {
  const p = policy(DEFAULT_CORS);
  const sdkHeaders = 'authorization, content-type, x-stainless-arch, x-stainless-lang, x-stainless-os, x-stainless-package-version, x-stainless-retry-count, x-stainless-runtime, x-stainless-runtime-version, x-stainless-timeout, openai-organization, openai-project, x-request-id';

  it('reflects the request headers the SDKs ask for, with methods, max-age and Vary', () => {
    expect(p.preflightHeaders(preflight('http://localhost:5173', { 'access-control-request-headers': sdkHeaders }))).toEqual({
      'access-control-allow-origin': 'http://localhost:5173',
      'access-control-allow-methods': 'GET, POST, OPTIONS',
      'access-control-allow-headers': sdkHeaders,
      'access-control-max-age': '600',
      vary: 'Origin, Access-Control-Request-Headers',
    });
  });

  it('falls back to a fixed list for a missing, malformed or huge header list', () => {
    for (const asked of [undefined, 'content-type\r\nx: y', 'a;b', `${'x-a,'.repeat(1000)}x-b`]) {
      const headers = p.preflightHeaders(preflight('http://localhost:5173', asked === undefined ? {} : { 'access-control-request-headers': asked.replace(/[\r\n]/g, ' ') }))!;
      expect(headers['access-control-allow-headers']).toBe('authorization, content-type, x-request-id, openai-organization, openai-project, openai-beta');
    }
  });

  it('answers Private Network Access preflights for allowed origins', () => {
    const headers = p.preflightHeaders(preflight('http://localhost:5173', { 'access-control-request-private-network': 'true' }))!;
    expect(headers['access-control-allow-private-network']).toBe('true');
  });

  it('gives nothing to a disallowed or missing origin', () => {
    expect(p.preflightHeaders(preflight('http://evil.example'))).toBeUndefined();
    expect(p.preflightHeaders(preflight(undefined))).toBeUndefined();
  });

  it('tells a preflight from a plain OPTIONS', () => {
    expect(isPreflight(preflight('http://localhost:5173'))).toBe(true);
    expect(isPreflight(new Request('http://h/v1/models', { method: 'OPTIONS' }))).toBe(false);
    expect(isPreflight(new Request('http://h/v1/models', { method: 'OPTIONS', headers: { origin: 'http://localhost:1' } }))).toBe(false);
    expect(isPreflight(new Request('http://h/v1/models', { method: 'POST', headers: { origin: 'http://localhost:1', 'access-control-request-method': 'POST' } }))).toBe(false);
  });
});

describe('own origins', () => {
  it('is the listen address, or every interface for a wildcard host', () => {
    expect(ownOrigins('http://127.0.0.1:8080/', ['127.0.0.1', '10.0.0.5'])).toEqual(['http://127.0.0.1:8080']);
    expect(ownOrigins('http://0.0.0.0:8080/', ['127.0.0.1', '10.0.0.5', '::1', 'fe80::1'])).toEqual([
      'http://localhost:8080',
      'http://127.0.0.1:8080',
      'http://10.0.0.5:8080',
      'http://[::1]:8080',
      'http://[fe80::1]:8080',
    ]);
  });
});

describe('x-request-id', () => {
  const request = (id?: string) => new Request('http://h/v1/models', { headers: id === undefined ? {} : { 'x-request-id': id } });
  const generate = () => 'req_generated';

  it('echoes a well-formed client id', () => {
    for (const id of ['abc', '3f2b8c1e-9d4a-4e7b-8f00-1234567890ab', '01HV6Z3QK8', 'trace:1/span+2=', 'x'.repeat(128)]) expect(requestIdFor(request(id), generate)).toBe(id);
  });

  it('replaces a missing, long or odd one with a new id', () => {
    for (const id of [undefined, '', 'x'.repeat(129), 'has space', '<script>', 'é']) expect(requestIdFor(request(id), generate)).toBe('req_generated');
    expect(requestIdFor(request())).toMatch(/^req_[0-9a-f]{32}$/);
  });
});
