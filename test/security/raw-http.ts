/**
 * HTTP requests whose request target is sent byte for byte (like `curl --path-as-is`):
 * `fetch` and the `openai` client normalize paths before sending, which would hide exactly
 * the encodings these tests are about.
 */
import http from 'node:http';

export interface RawResponse {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  /** The body as text ('' for streams cut after the headers). */
  readonly body: string;
}

export interface RawRequest {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  /** On a 200, resolve on the status line and headers, then drop the connection (SSE streams). */
  readonly headersOnly?: boolean;
}

/** Send `target` (path and query, unmodified) to `base` (http://host:port/). */
export function rawRequest(base: string, target: string, options: RawRequest = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: hostname,
        port: Number(port),
        path: target,
        method: options.method ?? 'GET',
        headers: { ...(options.body !== undefined && { 'content-type': 'application/json' }), ...options.headers },
        agent: false,
      },
      (response) => {
        if (options.headersOnly && response.statusCode === 200) {
          resolve({ status: response.statusCode!, headers: response.headers, body: '' });
          response.destroy();
          return;
        }
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body: Buffer.concat(chunks).toString('utf8') }));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(options.body);
  });
}

/** The parsed JSON of a response body, or undefined when it is not JSON. */
export function jsonOf(response: RawResponse): unknown {
  try {
    return JSON.parse(response.body);
  } catch {
    return undefined;
  }
}
