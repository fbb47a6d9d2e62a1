/**
 * Real heads on loopback for API tests: `serveHead` over stories260k (or the demo model) on
 * port 0, the official `openai` client pointed at it, and small helpers for raw HTTP/SSE.
 * Every test file closes what it starts in `afterAll`.
 */
import OpenAI from 'openai';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';
import type { ControlMessage } from '../../src/shared/control.ts';
import { serveHead, type ServeOptions, type ServingHead } from '../../src/node/serve/serve-head.ts';
import { STORIES_DIR } from '../engine/harness.ts';
import { testHeadOptions } from '../fixtures/test-head.ts';
import { specFetch } from '../openapi/spec-fetch.ts';

export { STORIES_DIR };

/** The greedy text of stories260k from prompt [1], as the word-level stand-in tokenizer reads it. */
export function storiesText(ids: readonly number[]): string {
  return ids.map((id) => `t${id}`).join(' ');
}

/** A head serving stories260k on 127.0.0.1:0 that runs every layer itself (override any option). */
export function serveStories(extra: Partial<ServeOptions> = {}): Promise<ServingHead> {
  return serveHead(testHeadOptions(extra));
}

/**
 * The official client against `serving` (no retries: a refusal must surface as it is). Every
 * body and stream chunk it receives is checked against the OpenAI spec (`specFetch`).
 */
export function clientFor(serving: ServingHead, apiKey = 'unused'): OpenAI {
  return new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey, maxRetries: 0, timeout: 60_000, fetch: specFetch });
}

/** Whatever `fn` throws (fails the test when it does not throw). */
export async function thrown(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail');
}

/** POST `body` (already a string) as JSON and return status, headers and parsed body (checked against the spec). */
export async function postRaw(url: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; json: unknown; headers: Headers }> {
  const response = await specFetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: response.status, json, headers: response.headers };
}

/** Polls `check` every 20 ms until it holds or `timeoutMs` passes; returns whether it held. */
export async function eventually(check: () => boolean, timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return check();
}

export interface SseEvent {
  readonly event: string;
  readonly data: string;
}

/** Reads named SSE events (`event:` / `data:`) from a response body until `enough(events)`, then cancels it. */
export async function readSseEvents(response: Response, enough: (events: readonly SseEvent[]) => boolean): Promise<SseEvent[]> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const events: SseEvent[] = [];
  let buffer = '';
  try {
    while (!enough(events)) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let event = 'message';
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('event:')) event = line.slice(6).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
        }
        if (data.length > 0) events.push({ event, data: data.join('\n') });
      }
    }
  } finally {
    await reader.cancel();
  }
  return events;
}

/**
 * A PeerLink that lets `open` activation frames through, then holds the rest until more are
 * allowed (`allow`, `hold`) or all are (`release`): a session stays live (and its stream
 * open) for as long as a test needs, and moves on exactly as far as the test says. A held
 * frame gives up when its request is aborted. Control messages (assign, stats) always pass.
 */
export class GatedLink implements PeerLink {
  private credits: number;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly inner: PeerLink,
    open: number,
  ) {
    this.credits = open;
  }

  get closed(): Promise<void> {
    return this.inner.closed;
  }

  /** Frames held right now. */
  get held(): number {
    return this.waiting.length;
  }

  /** Let every frame through from now on. */
  release(): void {
    this.credits = Infinity;
    this.flush();
  }

  /** Let `open` more frames through (held ones first), then hold again. */
  hold(open: number): void {
    this.credits = open;
    this.flush();
  }

  /** Let `count` more frames through than already may pass. */
  allow(count: number): void {
    this.credits += count;
    this.flush();
  }

  async request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    if (this.credits > 0) this.credits--;
    else {
      await new Promise<void>((resolve, reject) => {
        const turn = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = () => {
          const index = this.waiting.indexOf(turn);
          if (index >= 0) this.waiting.splice(index, 1);
          reject(signal!.reason);
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        this.waiting.push(turn);
      });
    }
    return this.inner.request(frame, signal);
  }

  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    return this.inner.control(message, signal);
  }


  close(reason?: string): Promise<void> {
    this.release();
    return this.inner.close(reason);
  }

  private flush(): void {
    while (this.credits > 0 && this.waiting.length > 0) {
      this.credits--;
      this.waiting.shift()!();
    }
  }
}
