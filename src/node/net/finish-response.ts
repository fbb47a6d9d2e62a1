/**
 * The last touch on every HTTP response a server of ours sends (start-server.ts wraps the
 * app's fetch with it):
 * - a reason phrase on the status line (`HTTP/1.1 200 OK`): a `Response` built without a
 *   `statusText` would otherwise go out as `HTTP/1.1 200 ` (Node writes what it is given);
 * - gzip of a whole JSON body when the request's `Accept-Encoding` accepts gzip (q > 0) and the
 *   body is at least {@link GZIP_MIN_BYTES}; `vary: accept-encoding` on every JSON answer.
 *   Streams (SSE, NDJSON, downloads) are never compressed: each event must reach the client
 *   when it is written.
 * WebSocket upgrades and responses without a body are passed through untouched.
 */
import { STATUS_CODES } from 'node:http';
import { promisify } from 'node:util';
import { gzip as gzipCallback } from 'node:zlib';

const gzip = promisify(gzipCallback);

/** Smaller JSON bodies are sent as they are (gzip's own header and trailer are 18 bytes). */
export const GZIP_MIN_BYTES = 256;

/** Whether an `Accept-Encoding` value accepts gzip: `gzip` or `*` listed with a q-value above 0 (RFC 9110 §12.5.3). */
export function acceptsGzip(header: string | null): boolean {
  if (header === null) return false;
  let gzipQ: number | undefined;
  let anyQ: number | undefined;
  for (const item of header.split(',')) {
    const [name, ...params] = item.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const value = q === undefined ? 1 : Number(q.slice(2));
    if (name.trim() === 'gzip' || name.trim() === 'x-gzip') gzipQ = Number.isFinite(value) ? value : 0;
    else if (name.trim() === '*') anyQ = Number.isFinite(value) ? value : 0;
  }
  return (gzipQ ?? anyQ ?? 0) > 0;
}

function isWholeJson(response: Response): boolean {
  const type = response.headers.get('content-type')?.toLowerCase() ?? '';
  return type.startsWith('application/json') && !response.headers.has('content-encoding');
}

/** `response` as it should go out for `request` (see the file's header). */
export async function finishResponse(request: Request, response: Response): Promise<Response> {
  if (response.status === 101 || request.headers.get('upgrade') !== null || (response as { crossws?: unknown }).crossws !== undefined) return response;
  const statusText = response.statusText || STATUS_CODES[response.status] || 'Unknown';
  if (response.body === null || request.method === 'HEAD' || !isWholeJson(response)) {
    return response.statusText === statusText ? response : rebuilt(response, response.body, statusText);
  }
  const headers = new Headers(response.headers);
  headers.append('vary', 'Accept-Encoding');
  const body = new Uint8Array(await response.arrayBuffer());
  if (!acceptsGzip(request.headers.get('accept-encoding')) || body.byteLength < GZIP_MIN_BYTES) {
    headers.set('content-length', String(body.byteLength));
    return new Response(body, { status: response.status, statusText, headers });
  }
  const packed = await gzip(body);
  headers.set('content-encoding', 'gzip');
  headers.set('content-length', String(packed.byteLength));
  return new Response(packed, { status: response.status, statusText, headers });
}

function rebuilt(response: Response, body: ReadableStream<Uint8Array> | null, statusText: string): Response {
  return new Response(body, { status: response.status, statusText, headers: response.headers });
}
