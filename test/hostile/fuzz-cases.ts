/**
 * HTTP fuzz cases, generated from a fixed seed: wrong types for every field of every
 * endpoint (the top-level fields and the nested ones: messages and their parts, input items,
 * stream options, formats, tools), random mutations of several fields at once, random bytes,
 * truncated JSON, deeply nested JSON, huge strings, out-of-range token ids and numbers, other
 * methods and odd paths. Every valid base asks for one token, so a mutation that happens to be
 * valid is cheap to serve.
 */
import { mulberry32 } from '../fixtures/checkpoints.ts';

export interface FuzzCase {
  readonly kind: string;
  readonly method: string;
  readonly path: string;
  /** The body as sent (a string, or raw bytes); absent for GET. */
  readonly body?: string | Uint8Array;
}

type Path = readonly (string | number)[];

const MODEL = 'stories260k';
const BASES: Record<string, Record<string, unknown>> = {
  '/v1/chat/completions': { model: MODEL, messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], max_tokens: 1, temperature: 0 },
  '/v1/completions': { model: MODEL, prompt: [1, 461], max_tokens: 1, temperature: 0 },
  '/v1/responses': { model: MODEL, input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }], max_output_tokens: 1, temperature: 0 },
};

/** Every field each endpoint reads (README tables), nested ones by path. */
const FIELDS: Record<string, readonly Path[]> = {
  '/v1/chat/completions': [
    ['model'], ['messages'], ['messages', 0], ['messages', 0, 'role'], ['messages', 0, 'content'], ['messages', 0, 'content', 0], ['messages', 0, 'content', 0, 'type'],
    ['messages', 0, 'content', 0, 'text'], ['messages', 0, 'name'], ['messages', 0, 'tool_calls'], ['messages', 0, 'tool_call_id'], ['messages', 1],
    ['max_tokens'], ['max_completion_tokens'], ['temperature'], ['top_p'], ['seed'], ['stop'], ['stop', 0], ['presence_penalty'], ['frequency_penalty'],
    ['logprobs'], ['top_logprobs'], ['stream'], ['stream_options'], ['stream_options', 'include_usage'], ['n'], ['user'], ['modalities'], ['modalities', 0],
    ['top_k'], ['min_p'], ['repetition_penalty'], ['tools'], ['tools', 0], ['tools', 0, 'type'], ['tools', 0, 'function'], ['tools', 0, 'function', 'name'],
    ['tools', 0, 'function', 'parameters'], ['tool_choice'], ['tool_choice', 'function', 'name'], ['parallel_tool_calls'], ['response_format'], ['response_format', 'type'],
    ['response_format', 'json_schema'], ['response_format', 'json_schema', 'name'], ['response_format', 'json_schema', 'schema'], ['response_format', 'json_schema', 'strict'],
    ['functions'], ['function_call'], ['logit_bias'], ['audio'], ['metadata'], ['store'], ['service_tier'], ['prediction'], ['reasoning_effort'], ['web_search_options'], ['speculate'],
  ],
  '/v1/completions': [
    ['model'], ['prompt'], ['prompt', 0], ['prompt', 1], ['max_tokens'], ['temperature'], ['top_p'], ['seed'], ['stop'], ['stop', 0], ['presence_penalty'],
    ['frequency_penalty'], ['logprobs'], ['stream'], ['stream_options'], ['stream_options', 'include_usage'], ['n'], ['echo'], ['best_of'], ['suffix'], ['user'],
    ['top_k'], ['min_p'], ['repetition_penalty'], ['logit_bias'], ['speculate'],
  ],
  '/v1/responses': [
    ['model'], ['input'], ['input', 0], ['input', 0, 'role'], ['input', 0, 'type'], ['input', 0, 'content'], ['input', 0, 'content', 0], ['input', 0, 'content', 0, 'type'],
    ['input', 0, 'content', 0, 'text'], ['input', 1], ['input', 1, 'call_id'], ['input', 1, 'output'], ['instructions'], ['max_output_tokens'], ['temperature'], ['top_p'],
    ['stream'], ['seed'], ['include'], ['include', 0], ['top_logprobs'], ['store'], ['metadata'], ['metadata', 'k'], ['truncation'], ['user'], ['parallel_tool_calls'],
    ['tools'], ['tools', 0], ['tools', 0, 'type'], ['tools', 0, 'name'], ['tools', 0, 'parameters'], ['tool_choice'], ['text'], ['text', 'format'], ['text', 'format', 'type'],
    ['text', 'format', 'schema'], ['text', 'format', 'name'], ['text', 'verbosity'], ['reasoning'], ['reasoning', 'effort'], ['previous_response_id'], ['conversation'],
    ['background'], ['prompt'], ['stream_options'], ['service_tier'], ['max_tool_calls'], ['safety_identifier'], ['prompt_cache_key'], ['context_management'], ['speculate'], ['stream_options', 'include_obfuscation'],
  ],
};

const NESTED = '__NESTED__';
const HUGE = 'h'.repeat(64 * 1024);

/** The wrong values every field gets (and that mutations draw from). */
const VALUES: readonly unknown[] = [
  null, true, false, 0, -1, 1, 1.5, 1e308, -1e308, 2 ** 53, 4294967296, '', 'x', 'stories260k', 'text', 'function',
  '\u0000\ud800', 'é'.repeat(70), HUGE, [], [1], [-1], [null], ['x'], [[]], {}, { a: 1 }, { type: 'x' }, { type: 'text', text: 'hi' },
  { type: 'function', function: { name: 'f' } }, NESTED,
];

function setPath(target: Record<string, unknown>, path: Path, value: unknown): void {
  let node: Record<string | number, unknown> = target;
  for (let i = 0; i < path.length - 1; i++) {
    const key = path[i]!;
    const next = node[key];
    if (typeof next !== 'object' || next === null) node[key] = typeof path[i + 1] === 'number' ? [] : {};
    node = node[key] as Record<string | number, unknown>;
  }
  const last = path[path.length - 1]!;
  if (value === undefined) delete node[last];
  else node[last] = value;
}

const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/** `body` as JSON text, the NESTED placeholder replaced by arrays nested `depth` deep. */
function serialize(body: unknown, depth: number): string {
  return JSON.stringify(body).replaceAll(`"${NESTED}"`, '['.repeat(depth) + ']'.repeat(depth));
}

export function fuzzCases(seed: number): FuzzCase[] {
  const random = mulberry32(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const depth = () => pick([64, 65, 300, 5000]);
  const cases: FuzzCase[] = [];
  const endpoints = Object.keys(BASES);

  // Every field of every endpoint, with every wrong value.
  const lengthField = (field: Path) => field.length === 1 && ['max_tokens', 'max_completion_tokens', 'max_output_tokens'].includes(field[0] as string);
  for (const path of endpoints) {
    for (const field of FIELDS[path]!) {
      for (const value of VALUES) {
        // Without a length (null is absent) the answer is the model's default: 511 tokens, slow.
        if (lengthField(field) && value === null) continue;
        const body = clone(BASES[path]!);
        setPath(body, field, value);
        // Nesting in every field at each depth that matters: just over the schema limit (64),
        // over the body limit (256), and deep enough to overflow code that recurses (5,000).
        for (const d of value === NESTED ? [65, 300, 5000] : [depth()]) cases.push({ kind: 'field type', method: 'POST', path, body: serialize(body, d) });
      }
      const absent = clone(BASES[path]!);
      setPath(absent, field, undefined);
      if (!lengthField(field)) cases.push({ kind: 'field absent', method: 'POST', path, body: JSON.stringify(absent) });
    }
  }
  // Several fields at once.
  for (let i = 0; i < 700; i++) {
    const path = pick(endpoints);
    const body = clone(BASES[path]!);
    for (let j = 1 + Math.floor(random() * 4); j > 0; j--) setPath(body, pick(FIELDS[path]!), pick(VALUES));
    // A mutation that leaves the request valid must stay cheap: one token.
    if (typeof body.max_tokens !== 'number' || body.max_tokens > 4) body.max_tokens = pick([1, 0, -1, 1e9, 2.5, 'x']);
    if (body.max_completion_tokens !== undefined && (typeof body.max_completion_tokens !== 'number' || body.max_completion_tokens > 4)) body.max_completion_tokens = pick([1, 0, 1e9, 'x']);
    if (path === '/v1/responses' && (typeof body.max_output_tokens !== 'number' || body.max_output_tokens > 4)) body.max_output_tokens = pick([1, 0, 1e9, 'x']);
    cases.push({ kind: 'mutation', method: 'POST', path, body: serialize(body, depth()) });
  }
  // Out-of-range ids and numbers.
  for (let i = 0; i < 300; i++) {
    const id = pick([-1, 512, 513, 1e6, 2 ** 32, 2 ** 53, 1.5, -0, 511, 0]);
    const cut = pick([[id], [1, id], Array.from({ length: 600 }, () => 1), []]);
    cases.push({ kind: 'token ids', method: 'POST', path: '/v1/completions', body: JSON.stringify({ model: MODEL, prompt: cut, max_tokens: pick([1, 512, 600, 1e6, 0]), temperature: 0 }) });
  }
  for (let i = 0; i < 100; i++) {
    cases.push({ kind: 'model id', method: 'GET', path: `/v1/models/${encodeURIComponent(pick(['stories260k', 'x', '%', '..', '\u0000', 'é', HUGE.slice(0, 4000), '-1']))}` });
  }
  // Bytes that are no JSON, and JSON cut short.
  for (let i = 0; i < 400; i++) {
    const bytes = Uint8Array.from({ length: Math.floor(random() * 3000) }, () => Math.floor(random() * 256));
    cases.push({ kind: 'random bytes', method: 'POST', path: pick(endpoints), body: bytes });
  }
  for (let i = 0; i < 400; i++) {
    const path = pick(endpoints);
    const text = JSON.stringify({ ...BASES[path]!, stop: ['a', 'b'], user: 'u', seed: 3 });
    cases.push({ kind: 'truncated json', method: 'POST', path, body: text.slice(0, Math.floor(random() * text.length)) });
  }
  // Deeply nested bodies, and nesting in every field.
  for (let i = 0; i < 60; i++) {
    const path = pick(endpoints);
    const body = random() < 0.3 ? NESTED : (() => {
      const b = clone(BASES[path]!);
      setPath(b, pick(FIELDS[path]!), NESTED);
      return b;
    })();
    cases.push({ kind: 'nested json', method: 'POST', path, body: serialize(body, pick([257, 10_000, 100_000])) });
  }
  // Other methods and odd paths.
  const paths = ['/v1/chat/completions', '/v1/completions', '/v1/responses', '/v1/models', '/v1/responses/abc', '/v1/%2e%2e/x', '/v1//models', '/v1/models/', '/%76%31/models', `/v1/${'p'.repeat(2000)}`, '/metrics/x', '/api/state?x=1'];
  for (let i = 0; i < 200; i++) {
    const method = pick(['GET', 'PUT', 'DELETE', 'PATCH', 'POST']);
    cases.push({ kind: 'method/path', method, path: pick(paths), ...(method === 'GET' ? {} : { body: '{}' }) });
  }
  return cases;
}
