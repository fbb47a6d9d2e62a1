/**
 * The soak's two halves: `startSoakHead` runs the head in a child process (soak-head.ts,
 * with --expose-gc, so its memory is the head's alone) and measures it over IPC; `runLoad`
 * streams chat completions at it from this process, disconnecting at random, until the time
 * is up. Used by test/soak/soak.test.ts (CI) and `npm run soak` (longer).
 */
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { ServeOptions } from '../../src/node/serve/serve-head.ts';
import { mulberry32 } from '../fixtures/checkpoints.ts';
import type { SoakHolds, SoakMeasure } from './soak-head.ts';

export type { SoakHolds, SoakMeasure };

export interface SoakHead {
  readonly url: string;
  readonly child: ChildProcess;
  measure(): Promise<SoakMeasure>;
  /** The ranges the head counts loaded on each peer, what keeps each, and its two recent plan generations. */
  holds(): Promise<SoakHolds>;
  /** Write a heap snapshot of the head to `file` (after a collection); resolves with its path. */
  snapshot(file: string): Promise<string>;
  close(): Promise<void>;
}

export async function startSoakHead(options: ServeOptions, env: NodeJS.ProcessEnv = {}): Promise<SoakHead> {
  const child = fork(path.join(import.meta.dirname, 'soak-head.ts'), [JSON.stringify(options)], {
    execArgv: ['--expose-gc', '--import', 'tsx'],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-8000);
    if (process.env.SOAK_VERBOSE) process.stderr.write(chunk);
  });
  const waiting = new Map<number, { resolve: (m: never) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  const url = await new Promise<string>((resolve, reject) => {
    child.on('message', (message: { kind?: string; url?: string; id?: number; result?: never; error?: string }) => {
      if (message.kind === 'ready') return resolve(message.url!);
      const pending = message.id === undefined ? undefined : waiting.get(message.id);
      if (!pending) return;
      waiting.delete(message.id!);
      if (message.error) pending.reject(new Error(message.error));
      else pending.resolve(message.result!);
    });
    child.once('exit', (code) => {
      const error = new Error(`the soak head exited (${code}): ${stderr}`);
      reject(error);
      for (const pending of waiting.values()) pending.reject(error);
    });
  });
  const ask = <T>(kind: string) =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, { resolve: resolve as (m: never) => void, reject });
      child.send({ kind, id });
    });
  return {
    url,
    child,
    measure: () => ask<SoakMeasure>('measure'),
    holds: () => ask<SoakHolds>('holds'),
    snapshot: (file) =>
      new Promise((resolve, reject) => {
        const id = nextId++;
        waiting.set(id, { resolve: resolve as never, reject });
        child.send({ kind: 'snapshot', id, path: file });
      }),
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => (clearTimeout(timer), resolve()));
        child.send({ kind: 'close' });
      }),
  };
}

export interface LoadOptions {
  readonly url: string; // http://host:port/
  readonly model: string;
  readonly durationMs: number;
  readonly concurrency: number;
  readonly seed: number;
  /** Share of requests the client abandons part way (default 0.3). */
  readonly disconnectShare?: number;
  /** Tokens asked for per request: uniform in [min, max] (default 8–48). */
  readonly maxTokens?: readonly [number, number];
  /** Called after each request with the running count (progress, checkpoints). */
  readonly onRequest?: (served: number) => void | Promise<void>;
}

export interface LoadResult {
  readonly requests: number;
  readonly completed: number;
  readonly disconnected: number;
  readonly tokens: number; // content chunks received
  /** Requests that got a status other than 200, or a stream that broke (should be 0). */
  readonly failures: string[];
}

/** Streams requests from `concurrency` workers until `durationMs` has passed. */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const random = mulberry32(options.seed);
  const [minTokens, maxTokens] = options.maxTokens ?? [8, 48];
  const share = options.disconnectShare ?? 0.3;
  const end = Date.now() + options.durationMs;
  const result = { requests: 0, completed: 0, disconnected: 0, tokens: 0, failures: [] as string[] };
  const worker = async () => {
    while (Date.now() < end) {
      const tokens = minTokens + Math.floor(random() * (maxTokens - minTokens + 1));
      const cutAfter = random() < share ? Math.floor(random() * tokens) : undefined;
      const outcome = await oneStream(options, tokens, cutAfter, random() < 0.5 ? [1] : [1, 461, 461]);
      result.requests++;
      if (outcome.kind === 'failed') result.failures.push(outcome.reason);
      else if (outcome.kind === 'cut') result.disconnected++;
      else result.completed++;
      result.tokens += outcome.chunks;
      await options.onRequest?.(result.requests);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  return result;
}

type Outcome = { kind: 'done' | 'cut'; chunks: number } | { kind: 'failed'; reason: string; chunks: number };

/** One streamed completion; with `cutAfter`, the client goes away after that many chunks. */
async function oneStream(options: LoadOptions, maxTokens: number, cutAfter: number | undefined, prompt: number[]): Promise<Outcome> {
  const abort = new AbortController();
  let chunks = 0;
  try {
    const response = await fetch(`${options.url}v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: options.model, prompt, max_tokens: maxTokens, temperature: 0, stream: true }),
      signal: abort.signal,
    });
    if (response.status !== 200) return { kind: 'failed', reason: `status ${response.status}: ${await response.text()}`, chunks };
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let at: number;
      while ((at = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, at);
        buffer = buffer.slice(at + 2);
        if (block === 'data: [DONE]') return { kind: 'done', chunks };
        if (block.includes('"error"')) return { kind: 'failed', reason: block, chunks };
        chunks++;
        if (cutAfter !== undefined && chunks >= cutAfter) {
          abort.abort();
          return { kind: 'cut', chunks };
        }
      }
    }
    return { kind: 'failed', reason: 'the stream ended without [DONE]', chunks };
  } catch (error) {
    if (abort.signal.aborted) return { kind: 'cut', chunks };
    return { kind: 'failed', reason: String(error), chunks };
  }
}
