/**
 * One soak run: a head (its own process, two local peer processes, stories260k, its own
 * layers too — three hops: in-process worker, two relay sockets) under streamed completions
 * from `concurrency` clients that disconnect at random, a dashboard listening on /api/events
 * and /metrics scraped all along. The head is measured after forced garbage collections at
 * the end of the warm-up and at each checkpoint; at the end, with the load gone, every
 * session must have closed and every peer's KV be empty. The CI test and `npm run soak`
 * (soak-cli.ts) run this with different durations and check the same bounds.
 */
import { STORIES_DIR } from '../engine/harness.ts';
import { runLoad, startSoakHead, type SoakMeasure } from './soak-run.ts';

export interface SoakOptions {
  readonly warmupMs: number;
  readonly checkpoints: number;
  readonly checkpointMs: number;
  readonly concurrency: number;
  readonly home: string; // MESHNET_HOME for the head and its peers
  readonly log?: (line: string) => void;
}

export interface SoakPoint extends SoakMeasure {
  readonly atMs: number; // since the load started
  readonly requests: number; // served so far
  readonly tokens: number;
}

export interface SoakReport {
  readonly warm: SoakPoint;
  readonly points: readonly SoakPoint[]; // after each checkpoint
  /** After the load stopped and the sessions closed. */
  readonly settled: SoakMeasure;
  readonly requests: number;
  readonly completed: number;
  readonly disconnected: number;
  readonly tokens: number;
  readonly failures: readonly string[];
  readonly dashboardEvents: number;
  readonly metricsScrapes: number;
  /** Hops replaced (`meshnet_repairs_total{kind="replaced"}` at the end): no peer fails here, so any is a false one. */
  readonly replaced: number;
}

/**
 * The bounds a soak must keep. Heap: the head's heap after GC at the end is at most
 * HEAP_GROWTH_BYTES above the warm-up's, however many requests were served (before the fix
 * it grew by ~1.5 KB per token: tens of MB per minute; what grows now is compiled code,
 * well under 1 MiB). RSS: at most RSS_GROWTH_BYTES above the warm-up's at every checkpoint —
 * native memory (onnxruntime in the head's worker, malloc's arenas) moves by up to ~55 MiB
 * between runs, in steps, not with the requests served; the leak added ~110 KB per request.
 */
export const HEAP_GROWTH_BYTES = 4 * 2 ** 20;
export const RSS_GROWTH_BYTES = 64 * 2 ** 20;

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const log = options.log ?? (() => {});
  // Twice the clients in slots: a client that cuts its stream and asks again at once may race
  // the head's notice of the closed socket (test/api/disconnect.test.ts), which is not a leak.
  const head = await startSoakHead(
    { model: STORIES_DIR, port: 0, host: '127.0.0.1', localPeers: 2, link: 'relay', headLayers: 'auto', maxSessions: 2 * options.concurrency, device: 'cpu', dtype: 'fp32', threads: 1 },
    { MESHNET_HOME: options.home },
  );
  const dashboard = new AbortController();
  let dashboardEvents = 0;
  let metricsScrapes = 0;
  const watching = (async () => {
    const response = await fetch(`${head.url}api/events`, { signal: dashboard.signal });
    const reader = response.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      dashboardEvents += new TextDecoder().decode(value).split('\nevent: ').length - 1;
    }
  })().catch(() => {});
  const scraper = setInterval(() => {
    void fetch(`${head.url}metrics`).then(
      (r) => r.text().then(() => metricsScrapes++),
      () => {},
    );
  }, 1000);
  try {
    const totals = { requests: 0, completed: 0, disconnected: 0, tokens: 0, failures: [] as string[] };
    const started = Date.now();
    const load = async (durationMs: number, seed: number) => {
      const result = await runLoad({ url: head.url, model: 'stories260k', durationMs, concurrency: options.concurrency, seed });
      totals.requests += result.requests;
      totals.completed += result.completed;
      totals.disconnected += result.disconnected;
      totals.tokens += result.tokens;
      totals.failures.push(...result.failures);
    };
    const point = async (): Promise<SoakPoint> => {
      const measure = await head.measure();
      const p = { ...measure, atMs: Date.now() - started, requests: totals.requests, tokens: totals.tokens };
      log(`${(p.atMs / 1000).toFixed(0)} s: ${p.requests} requests, ${p.tokens} tokens; heap ${mib(p.heapUsed)}, rss ${mib(p.rss)}, array buffers ${mib(p.arrayBuffers)}`);
      return p;
    };
    await load(options.warmupMs, 1);
    const warm = await point();
    const points: SoakPoint[] = [];
    for (let i = 0; i < options.checkpoints; i++) {
      await load(options.checkpointMs, 2 + i);
      points.push(await point());
    }
    // The load is gone: sessions close (releases in the background), KV is freed.
    let settled = await head.measure();
    for (let i = 0; i < 50 && !isSettled(settled); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      settled = await head.measure();
    }
    const metrics = await (await fetch(`${head.url}metrics`)).text();
    const replaced = Number(/^meshnet_repairs_total\{kind="replaced"\} (\d+)/m.exec(metrics)?.[1] ?? NaN);
    return { warm, points, settled, ...totals, dashboardEvents, metricsScrapes, replaced };
  } finally {
    clearInterval(scraper);
    dashboard.abort();
    await watching;
    await head.close();
  }
}

/** No session tracked or holding a slot, and every peer's KV empty. */
export function isSettled(m: SoakMeasure): boolean {
  return m.trackedSessions === 0 && m.liveSessions === 0 && m.peers.every((p) => p.kvEntries === 0 && p.kvBytes === 0);
}

export const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
