/**
 * Every API body a test receives, checked against the official OpenAI OpenAPI description.
 *
 * `specFetch` is a drop-in `fetch` for clients under test:
 *   new OpenAI({ baseURL, apiKey, fetch: specFetch })          // the openai SDK
 *   createOpenAI({ baseURL, apiKey, fetch: specFetch })        // @ai-sdk/openai
 *   await specFetch(url, init)                                  // raw HTTP
 * It passes the response through untouched (streams stay streams, a cancel still reaches the
 * server) and checks, on the way, each JSON body and each SSE `data:` chunk against the
 * component schema of its endpoint (table `ENDPOINTS`), error bodies against
 * `ErrorResponse`, and the headers every response must carry (`x-request-id`;
 * `x-accel-buffering: no` on SSE; `retry-after` on 503). A Responses stream is also checked
 * for `event:` equal to the data's `type` and `sequence_number`s 0, 1, 2, ….
 *
 * Violations are recorded, not thrown (a test that expects a refusal must not mistake one for
 * its own error); `spec-setup.ts` (a vitest setup file) fails the test in `afterEach` when
 * any were recorded. `expectSpec(component, value)` checks one value directly (unit tests of
 * the builders).
 */
import { COMPLETION_STREAM_CHUNK, specErrors } from './spec-schemas.ts';

interface EndpointSchemas {
  readonly method: string;
  readonly path: RegExp;
  /** The whole JSON body (status < 400). */
  readonly body: string;
  /** Each SSE `data:` chunk, when the response is an event stream. */
  readonly chunk?: string;
  /** The stream ends with `data: [DONE]` (chat, completions) or not (Responses). */
  readonly done?: boolean;
}

/** Path → the spec's component schemas for its bodies and stream chunks. */
const ENDPOINTS: readonly EndpointSchemas[] = [
  { method: 'GET', path: /^\/v1\/models\/?$/, body: 'ListModelsResponse' },
  { method: 'GET', path: /^\/v1\/models\/[^/]+$/, body: 'Model' },
  { method: 'POST', path: /^\/v1\/chat\/completions$/, body: 'CreateChatCompletionResponse', chunk: 'CreateChatCompletionStreamResponse', done: true },
  { method: 'POST', path: /^\/v1\/completions$/, body: 'CreateCompletionResponse', chunk: COMPLETION_STREAM_CHUNK, done: true },
  { method: 'POST', path: /^\/v1\/responses$/, body: 'Response', chunk: 'ResponseStreamEvent', done: false },
];

/** Responses stream events after which nothing more comes. */
const TERMINAL_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed', 'error']);

const violations: string[] = [];

/** Violations recorded since the last call (and forgets them). */
export function takeSpecViolations(): string[] {
  return violations.splice(0);
}

function record(where: string, problem: string): void {
  violations.push(`${where}: ${problem}`);
}

/** Throws unless `value` conforms to the spec's component schema `component`. */
export function expectSpec(component: string, value: unknown): void {
  const errors = specErrors(component, value);
  if (errors) throw new Error(`not a valid ${component} per the OpenAI spec: ${errors}\n${JSON.stringify(value).slice(0, 2000)}`);
}

function checkValue(where: string, component: string, value: unknown): void {
  const errors = specErrors(component, value);
  if (errors) record(where, `not a valid ${component}: ${errors} — ${JSON.stringify(value).slice(0, 600)}`);
}

function checkHeaders(where: string, response: Response, sse: boolean): void {
  const id = response.headers.get('x-request-id');
  if (!id) record(where, 'no x-request-id header');
  if (sse && response.headers.get('x-accel-buffering') !== 'no') record(where, 'an event stream without x-accel-buffering: no');
  if (response.status === 503 && !response.headers.get('retry-after')) record(where, 'a 503 without retry-after');
}

/** Checks the chunks of one SSE stream as they pass. */
class StreamChecker {
  private buffer = '';
  private sequence = 0;
  private sawDone = false;
  private sawEnd = false; // an error chunk, or a Responses terminal event
  private readonly decoder = new TextDecoder();

  constructor(
    private readonly where: string,
    private readonly endpoint: EndpointSchemas,
  ) {}

  feed(bytes: Uint8Array): void {
    this.buffer += this.decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) >= 0) {
      this.event(this.buffer.slice(0, end));
      this.buffer = this.buffer.slice(end + 2);
    }
  }

  private event(block: string): void {
    let name: string | undefined;
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('event:')) name = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
    }
    if (data.length === 0) return;
    const text = data.join('\n');
    if (this.sawDone) record(this.where, `an event after [DONE]: ${text.slice(0, 200)}`);
    if (text === '[DONE]') {
      if (!this.endpoint.done) record(this.where, 'a Responses stream ends without [DONE] on api.openai.com');
      this.sawDone = true;
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return record(this.where, `a data line that is not JSON: ${text.slice(0, 200)}`);
    }
    const isError = typeof value === 'object' && value !== null && 'error' in value && !('type' in value);
    if (isError) {
      this.sawEnd = true;
      return checkValue(this.where, 'ErrorResponse', value);
    }
    checkValue(this.where, this.endpoint.chunk!, value);
    if (this.endpoint.done === false) {
      const event = value as { type?: unknown; sequence_number?: unknown };
      if (name !== event.type) record(this.where, `SSE event '${name}' carries data of type '${String(event.type)}'`);
      if (event.sequence_number !== this.sequence) record(this.where, `sequence_number ${String(event.sequence_number)}, expected ${this.sequence}`);
      this.sequence++;
      if (this.sawEnd) record(this.where, `an event after the terminal one: ${String(event.type)}`);
      if (TERMINAL_EVENTS.has(String(event.type))) this.sawEnd = true;
    }
  }

  /** The stream ended normally (not cancelled): it must have ended properly. */
  end(): void {
    if (this.buffer.trim() !== '') record(this.where, `the stream ends inside an event: ${this.buffer.slice(0, 200)}`);
    if (this.endpoint.done && !this.sawDone && !this.sawEnd) record(this.where, 'the stream ends without data: [DONE]');
    if (!this.endpoint.done && !this.sawEnd) record(this.where, 'the Responses stream ends without response.completed / incomplete / failed / error');
  }
}

function endpointFor(method: string, pathname: string): EndpointSchemas | undefined {
  return ENDPOINTS.find((e) => e.method === method && e.path.test(pathname));
}

/** `fetch`, with every API body and stream chunk checked against the spec on the way. */
export const specFetch: typeof fetch = async (input, init) => {
  // Not `new Request(input, init)`: that would consume a streamed request body.
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
  const pathname = new URL(url).pathname;
  const response = await fetch(input, init);
  const where = `${method} ${pathname} → ${response.status}`;
  const contentType = response.headers.get('content-type') ?? '';
  const sse = contentType.startsWith('text/event-stream');
  checkHeaders(where, response, sse);
  if (!pathname.startsWith('/v1') || method === 'OPTIONS' || response.body === null) return response;
  const endpoint = endpointFor(method, pathname);
  if (sse) {
    if (!endpoint?.chunk) {
      record(where, 'an event stream from an endpoint that does not stream');
      return response;
    }
    const checker = new StreamChecker(where, endpoint);
    const checked = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          checker.feed(chunk);
          controller.enqueue(chunk);
        },
        flush() {
          checker.end();
        },
      }),
    );
    return new Response(checked, { status: response.status, statusText: response.statusText, headers: response.headers });
  }
  const text = await response.text();
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    record(where, `a body that is not JSON (${contentType}): ${text.slice(0, 200)}`);
  }
  if (value !== undefined) {
    if (!contentType.startsWith('application/json')) record(where, `JSON sent as '${contentType}'`);
    if (response.status >= 400) checkValue(where, 'ErrorResponse', value);
    else if (endpoint) checkValue(where, endpoint.body, value);
    else record(where, 'a success from a path the spec table does not know (add it to ENDPOINTS)');
  }
  return new Response(text, { status: response.status, statusText: response.statusText, headers: response.headers });
};
