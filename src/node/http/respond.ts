/** Small HTTP helpers for the head's routes: OpenAI-shaped errors and bounded JSON bodies. */
import { ApiError, invalidJsonBody, mapError, payloadTooLarge, toErrorBody } from '../openai/errors.ts';

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
  return jsonResponse(toErrorBody(api), api.status, headers);
}

/** The request body parsed as JSON, refusing bodies over `limitBytes` (413) and bad JSON (400). */
export async function readJsonBody(request: Request, limitBytes: number): Promise<unknown> {
  const declared = Number(request.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > limitBytes) throw payloadTooLarge(limitBytes);
  const reader = request.body?.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (reader) {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > limitBytes) {
        await reader.cancel();
        throw payloadTooLarge(limitBytes);
      }
      chunks.push(value);
    }
  }
  const text = new TextDecoder().decode(Buffer.concat(chunks));
  try {
    return JSON.parse(text);
  } catch {
    throw invalidJsonBody();
  }
}
