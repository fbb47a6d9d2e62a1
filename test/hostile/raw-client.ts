/**
 * A client that speaks HTTP/1.1 byte for byte over a TCP socket: for requests no HTTP library
 * sends — bodies that stop half way, headers that never end, bytes that are no HTTP at all, an
 * upload cut off. `exchange` writes what it is given (optionally spread out in time) and
 * returns everything the server sent back, and when the server closed the connection.
 */
import net from 'node:net';

export interface RawExchange {
  /** The response's status (0 when the server sent nothing parsable). */
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** ms from connecting until the server closed the connection (or we gave up). */
  readonly closedAfterMs: number;
  /** True when the server had not closed the connection by `waitMs`. */
  readonly stillOpen: boolean;
}

export interface ExchangeOptions {
  /** Give up (and close) after this long (default 10 s). */
  readonly waitMs?: number;
  /** Destroy our socket this long after the last write (an upload cut off); the exchange resolves then. */
  readonly abortAfterMs?: number;
}

/** Connect to `base` (http://host:port/), send `parts` in order (a number between them: wait that many ms). */
export function exchange(base: string, parts: readonly (string | Uint8Array | number)[], options: ExchangeOptions = {}): Promise<RawExchange> {
  const { hostname, port } = new URL(base);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (stillOpen: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ ...parseResponse(Buffer.concat(chunks).toString('latin1')), closedAfterMs: Date.now() - started, stillOpen });
    };
    const giveUp = setTimeout(() => finish(true), options.waitMs ?? 10_000);
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('close', () => finish(false));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE') return finish(false);
      if (!done) reject(error);
    });
    socket.once('connect', async () => {
      for (const part of parts) {
        if (done || socket.destroyed) return;
        if (typeof part === 'number') await new Promise((r) => setTimeout(r, part));
        else socket.write(part);
      }
      if (options.abortAfterMs !== undefined) setTimeout(() => finish(false), options.abortAfterMs);
    });
  });
}

function parseResponse(text: string): { status: number; headers: Record<string, string>; body: string } {
  const end = text.indexOf('\r\n\r\n');
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(text);
  if (!match || end < 0) return { status: 0, headers: {}, body: text };
  const headers: Record<string, string> = {};
  for (const line of text.slice(0, end).split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = text.slice(end + 4);
  if (headers['transfer-encoding'] === 'chunked') body = dechunk(body);
  return { status: Number(match[1]), headers, body: Buffer.from(body, 'latin1').toString('utf8') };
}

function dechunk(text: string): string {
  let out = '';
  for (let at = 0; at < text.length; ) {
    const lineEnd = text.indexOf('\r\n', at);
    if (lineEnd < 0) break;
    const size = parseInt(text.slice(at, lineEnd), 16);
    if (!Number.isFinite(size) || size === 0) break;
    out += text.slice(lineEnd + 2, lineEnd + 2 + size);
    at = lineEnd + 2 + size + 2;
  }
  return out;
}

/** A POST's head for `path` with a JSON body of `length` bytes (the body is sent separately); `close` asks the server to close after answering. */
export function postHead(path: string, length: number, options: { close?: boolean } = {}): string {
  return `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n${options.close ? 'Connection: close\r\n' : ''}\r\n`;
}
