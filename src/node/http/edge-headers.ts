/**
 * What every HTTP response of the head carries, and the one request the key check never sees:
 * - `x-request-id`: the client's own when it sent a well-formed one (≤ 128 characters of
 *   `[A-Za-z0-9._:@/+=-]`), otherwise a new `req_<32 hex>`;
 * - CORS headers for allowed origins (see `cors.ts`);
 * - CORS preflights (`OPTIONS` + `Origin` + `Access-Control-Request-Method`) answered here,
 *   with 204 or 403, **before** the API-key middleware: a browser never sends credentials on
 *   a preflight, so requiring the key there would block every cross-origin caller. This
 *   middleware is mounted first, so preflights never reach the key check (whose open list
 *   exempts them too, `isOpenRequest` in auth.ts, should the order ever change).
 *
 * WebSocket upgrades are passed through untouched: crossws reads its hooks from the upgrade
 * response object, which h3 would rebuild if headers were prepared on it.
 */
import { randomUUID } from 'node:crypto';
import type { H3Event, Middleware } from 'h3';
import { ApiError, toErrorBody } from '../openai/errors.ts';
import { isPreflight } from './auth.ts';
import type { CorsPolicy } from './cors.ts';

/** A client's `x-request-id` is echoed when it matches this (UUIDs, ULIDs, trace ids, base64). */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

/** A new request id, `req_<32 hex>`. */
export function newRequestId(): string {
  return `req_${randomUUID().replaceAll('-', '')}`;
}

/** The client's `x-request-id` when well formed, otherwise a new `req_<32 hex>`. */
export function requestIdFor(request: Request, generate: () => string = newRequestId): string {
  const sent = request.headers.get('x-request-id');
  return sent !== null && CLIENT_REQUEST_ID.test(sent) ? sent : generate();
}

/** 403 for a preflight from an origin `--cors` does not allow (browsers show a CORS error). */
function originNotAllowed(origin: string): Response {
  const error = new ApiError(403, `Origin '${origin.slice(0, 200)}' is not allowed to call this server; start it with --cors to allow it.`, {
    type: 'invalid_request_error',
    code: 'origin_not_allowed',
  });
  return new Response(JSON.stringify(toErrorBody(error)), { status: 403, headers: { 'content-type': 'application/json' } });
}

/** The preflight exemption: answers a CORS preflight without calling the rest of the app. */
function answerPreflight(request: Request, cors: CorsPolicy, requestId: string): Response {
  const headers = cors.preflightHeaders(request);
  const response = headers ? new Response(null, { status: 204, headers }) : originNotAllowed(request.headers.get('origin') ?? '');
  response.headers.set('x-request-id', requestId);
  return response;
}

function prepareHeaders(event: H3Event, headers: Record<string, string>): void {
  // h3 merges `res.headers` into success responses and `res.errHeaders` into errors.
  for (const [name, value] of Object.entries(headers)) {
    event.res.headers.set(name, value);
    event.res.errHeaders.set(name, value);
  }
}

/** The middleware; mount it before the API-key check (`serve-head.ts`). */
export function edgeHeaders(cors: CorsPolicy): Middleware {
  return (event, next) => {
    const request = event.req;
    if (request.headers.get('upgrade')?.toLowerCase() === 'websocket') return next();
    const requestId = requestIdFor(request);
    if (isPreflight(request)) return answerPreflight(request, cors, requestId);
    prepareHeaders(event, { 'x-request-id': requestId, ...cors.responseHeaders(request.headers.get('origin')) });
    return next();
  };
}
