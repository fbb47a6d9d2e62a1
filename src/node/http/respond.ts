/** Small HTTP helpers for the head's routes: OpenAI-shaped errors and bounded JSON bodies. */
import { ApiError, clientClosedRequest, invalidJsonBody, mapError, payloadTooLarge, requestTimeout, toErrorBody } from '../openai/errors.ts';
import { newRequestId } from './edge-headers.ts';

/** How much of a request body the head reads, and for how long. */
export interface BodyLimits {
  /** Bodies over this many bytes get a 413 (4 MiB by default). */
  readonly bytes: number;
  /** The whole body must arrive within this many ms of the request's head (`--request-timeout`), else 408. */
  readonly timeoutMs: number;
}

/** 4 MiB; 30 s. */
export const DEFAULT_BODY_LIMITS: BodyLimits = { bytes: 4 * 2 ** 20, timeoutMs: 30_000 };

/** Headers of every SSE response; `x-accel-buffering: no` keeps nginx (and proxies that honour it) from holding chunks back. */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

export function jsonResponse(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });
}

/** Any thrown value as an OpenAI error response (mapped once, here at the edge). */
export function errorResponse(error: unknown): Response {
  const api = error instanceof ApiError ? error : mapError(error);
  const headers: Record<string, string> = api.retryAfterSeconds !== undefined ? { 'retry-after': String(api.retryAfterSeconds) } : {};
  // A body left unread (too large, too slow) must not keep the connection: Node would go on
  // reading — and discarding — it for a keep-alive that never comes.
  if (api.closesConnection) headers.connection = 'close';
  return jsonResponse(toErrorBody(api), api.status, headers);
}

/**
 * The raw answer to a request Node refused before the app saw it (start-server's
 * `clientError`): late headers or a body still arriving at Node's own request timeout → 408,
 * headers too large → 431, anything else unparsable → 400; each with an OpenAI error body,
 * a new `x-request-id` (like every other response: its request's headers may never have
 * been read) and `connection: close`.
 */
export function clientErrorAnswer(error: NodeJS.ErrnoException, timeoutMs: number, requestId: string = newRequestId()): { status: number; raw: string } {
  const api =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? requestTimeout(timeoutMs)
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? new ApiError(431, 'The request headers are too large.', { type: 'invalid_request_error', code: 'headers_too_large' })
        : new ApiError(400, 'The request is not valid HTTP/1.1.', { type: 'invalid_request_error', code: 'bad_request' });
  const body = JSON.stringify(toErrorBody(api));
  const reason = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' }[api.status as 400 | 408 | 431];
  return { status: api.status, raw: `HTTP/1.1 ${api.status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${requestId}\r\nconnection: close\r\n\r\n${body}` };
}

/**
 * The request body parsed as JSON. Refuses bodies over `limits.bytes` (413), bodies that have
 * not arrived in full within `limits.timeoutMs` (408: a slow or stalled client does not hold
 * the request open), and bad JSON (400); a client that goes away during its upload is a
 * ClientClosedRequest (499, for the metrics: nobody is left to answer).
 */
export async function readJsonBody(request: Request, limits: BodyLimits): Promise<unknown> {
  const declared = Number(request.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > limits.bytes) throw payloadTooLarge(limits.bytes);
  const reader = request.body?.getReader();
  const chunks: Uint8Array[] = [];
  if (reader) {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reader.cancel().catch(() => {});
    }, limits.timeoutMs);
    let size = 0;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (late) throw requestTimeout(limits.timeoutMs);
        if (done) break;
        size += value.byteLength;
        if (size > limits.bytes) {
          void reader.cancel().catch(() => {});
          throw payloadTooLarge(limits.bytes);
        }
        chunks.push(value);
      }
    } catch (error) {
      if (error instanceof ApiError) throw error;
      if (late) throw requestTimeout(limits.timeoutMs);
      // The upload broke off: the client closed its connection (or reset it).
      throw clientClosedRequest(error);
    } finally {
      clearTimeout(timer);
    }
  }
  const text = new TextDecoder().decode(Buffer.concat(chunks));
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw invalidJsonBody();
  }
  if (jsonDepth(text) > MAX_JSON_DEPTH) {
    throw new ApiError(400, `The JSON body is nested more than ${MAX_JSON_DEPTH} levels deep.`, { type: 'invalid_request_error', code: 'invalid_json' });
  }
  return body;
}

/**
 * How deep a JSON body may nest (arrays and objects). No field of any endpoint needs more —
 * tool and format schemas stop at 64 levels (request-output.ts) — and code walking a value
 * 100,000 levels deep (String() of a nested array, a recursive check) overflows the stack.
 */
export const MAX_JSON_DEPTH = 256;

/** The deepest nesting of arrays and objects in valid JSON `text` (brackets inside strings do not count). */
export function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) deepest = Math.max(deepest, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}
