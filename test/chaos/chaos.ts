/**
 * The chaos soak (#27): a head (its own process, no layers of its own, stories260k) and 3
 * `meshnet peer` processes (they rejoin a lost head by themselves), `clients` streaming greedy
 * clients that abort at random, and every few seconds one peer SIGKILLed (and started again
 * under its id), SIGSTOPped for 1–10 s, or restarted (SIGTERM, start); once, mid-run, the head
 * SIGKILLed and started again on its port. Counted: every completed stream must equal the
 * one-process answer, every failure must be a typed OpenAI error (no 5xx but the head's own
 * typed 503/504), a stream the head's death cut is counted apart; at the end — chaos stopped,
 * every peer back — no session tracked and no KV on any peer; the head's memory after GC at
 * the end against after the restart; the most ranges a peer held (sampled each second).
 * `npm run chaos` (chaos-cli.ts) runs it for minutes; test/chaos/chaos.test.ts for ≤ 60 s.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { BIN } from '../cli/run-cli.ts';
import { STORIES_DIR, STORIES_GOLDEN } from '../engine/harness.ts';
import { mulberry32 } from '../fixtures/checkpoints.ts';
import { isSettled } from '../soak/soak.ts';
import { startSoakHead, type SoakHead, type SoakMeasure } from '../soak/soak-run.ts';

export interface ChaosOptions {
  readonly durationMs: number;
  readonly clients: number;
  /** Time between two chaos events (each drawn in [min, max]). */
  readonly everyMs: readonly [number, number];
  readonly home: string;
  readonly seed?: number;
  readonly log?: (line: string) => void;
}

export interface ChaosReport {
  readonly requests: number;
  readonly golden: number;
  readonly wrong: readonly string[];
  readonly aborted: number;
  /** Typed errors by status and code, e.g. `503 route_unavailable`. */
  readonly typed: Readonly<Record<string, number>>;
  /** Untyped failures (a 500, a body without an OpenAI error): must be none. */
  readonly untyped: readonly string[];
  /** Streams cut or refused while the head was down (its restart). */
  readonly headDown: number;
  readonly events: Readonly<Record<string, number>>;
  readonly settled: SoakMeasure;
  readonly heapAfterChaos: number;
  readonly heapAtEnd: number;
  readonly rssAfterChaos: number;
  readonly rssAtEnd: number;
  readonly mostRanges: number;
  /** The longest a leased range outside the head's two recent plans was seen held (sampled each second). */
  readonly offPlanLongestMs: number;
  /** Samples where a peer held a range outside the recent plans unleased, or leased for longer than the grace. */
  readonly rangeViolations: readonly string[];
}

/**
 * How long a session may keep a range outside the two recent plans leased: it moves at its
 * next step boundary, and a step may first wait out a hung hop (the adaptive deadline, ≤ 1.5 s
 * on loopback) and its repair (a replacement loaded and warmed, ~1 s at load 10–20).
 */
export const OFF_PLAN_GRACE_MS = 5000;

const TOKEN = 'chaos-token';
const PEERS = ['c1', 'c2', 'c3'];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? (() => {});
  const rng = mulberry32(options.seed ?? 27);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = { MESHNET_HOME: path.join(options.home, 'home') };
  const startHead = () =>
    startSoakHead({ model: STORIES_DIR, port, host: '127.0.0.1', localPeers: 0, link: 'relay', headLayers: 'none', maxSessions: 2 * options.clients, device: 'cpu', dtype: 'fp32', threads: 1, joinToken: TOKEN }, env);
  const peers = new Map<string, ChildProcess>();
  const startPeer = (id: string) => {
    const child = spawn(process.execPath, [BIN, 'peer', '--head', `ws://127.0.0.1:${port}/peer/ws`, '--join-token', TOKEN, '--device', 'cpu', '--threads', '1', '--memory-budget', '256', '--peer-id', id], { env: { ...process.env, ...env, MESHNET_JOIN_TOKEN: undefined }, stdio: 'ignore' });
    peers.set(id, child);
    return child;
  };
  const stopped = new Set<string>();
  const exited = (child: ChildProcess) => new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));

  let head: SoakHead = await startHead();
  let headUp = true;
  let headGeneration = 0; // bumped when the head is killed: a request begun before it was cut by the restart
  for (const id of PEERS) startPeer(id);
  const ready = async (count: number, timeoutMs: number) => {
    const by = Date.now() + timeoutMs;
    for (;;) {
      const health = await fetch(`${base}/health`).then((r) => r.json() as Promise<{ ready: boolean; peers: { layers: unknown[] }[] }>).catch(() => undefined);
      if (health?.ready && health.peers.filter((p) => p.layers.length > 0).length >= count) return;
      if (Date.now() > by) {
        // What kept it: each peer's loaded ranges and quarantine, as the head sees them.
        const h = await head.holds().catch(() => undefined);
        const state = h ? h.holds.map((x) => `${x.peerId}[${x.range.start},${x.range.end})${x.quarantine ? ` quarantined: ${x.quarantine}` : ''}`).join('; ') : 'head did not answer';
        throw new Error(`the mesh did not get ready with ${count} peers within ${timeoutMs} ms (health ${JSON.stringify(health)}; holds ${state})`);
      }
      await sleep(100);
    }
  };
  await ready(PEERS.length, 90_000);
  const atStart = await head.measure();
  log(`start: head heap ${(atStart.heapUsed / 2 ** 20).toFixed(1)} MiB, rss ${(atStart.rss / 2 ** 20).toFixed(1)} MiB`);
  const golden = await completion(base);
  if (JSON.stringify(golden.ids) !== JSON.stringify(STORIES_GOLDEN)) throw new Error(`the mesh's answer before any chaos is not the one-process answer: ${golden.text}`);

  const report = { requests: 0, golden: 0, wrong: [] as string[], aborted: 0, typed: {} as Record<string, number>, untyped: [] as string[], headDown: 0, events: {} as Record<string, number>, mostRanges: 0, offPlanLongestMs: 0, rangeViolations: [] as string[] };
  const count = (table: Record<string, number>, key: string) => (table[key] = (table[key] ?? 0) + 1);
  const end = Date.now() + options.durationMs;
  let chaosOn = true;

  const client = async (index: number) => {
    const draw = mulberry32(1000 + index);
    while (Date.now() < end) {
      report.requests++;
      const generation = headGeneration;
      const abortAfter = draw() < 0.25 ? Math.floor(draw() * STORIES_GOLDEN.length) : undefined;
      const outcome = await streamed(base, abortAfter);
      if (outcome.kind === 'done') {
        if (outcome.text === golden.text) report.golden++;
        else report.wrong.push(outcome.text.slice(0, 120));
      } else if (outcome.kind === 'aborted') report.aborted++;
      else if (outcome.kind === 'typed') count(report.typed, outcome.what);
      else if (!headUp || generation !== headGeneration || outcome.kind === 'unreachable') report.headDown++;
      else report.untyped.push(outcome.what);
      if (outcome.kind !== 'done' && outcome.kind !== 'aborted') await sleep(50 + draw() * 200);
    }
  };

  const chaos = async () => {
    let headRestarted = false;
    while (chaosOn && Date.now() < end) {
      await sleep(options.everyMs[0] + rng() * (options.everyMs[1] - options.everyMs[0]));
      if (!chaosOn || Date.now() >= end) break;
      if (!headRestarted && Date.now() > end - options.durationMs / 2) {
        headRestarted = true;
        count(report.events, 'head restarted');
        log('chaos: SIGKILL the head, start it again on its port');
        headUp = false;
        headGeneration++;
        headInstance++;
        head.child.kill('SIGKILL');
        await exited(head.child);
        head = await startHead();
        headUp = true;
        continue;
      }
      const candidates = PEERS.filter((id) => !stopped.has(id));
      const id = candidates[Math.floor(rng() * candidates.length)];
      if (!id) continue;
      const child = peers.get(id)!;
      const action = rng();
      if (action < 0.34) {
        count(report.events, 'peer SIGKILLed');
        log(`chaos: SIGKILL ${id}, start it again`);
        child.kill('SIGKILL');
        await exited(child);
        startPeer(id);
      } else if (action < 0.67) {
        const ms = 1000 + Math.floor(rng() * 9000);
        count(report.events, 'peer SIGSTOPped');
        log(`chaos: SIGSTOP ${id} for ${ms} ms`);
        stopped.add(id);
        child.kill('SIGSTOP');
        void sleep(ms).then(() => {
          child.kill('SIGCONT');
          stopped.delete(id);
        });
      } else {
        count(report.events, 'peer restarted');
        log(`chaos: restart ${id} (SIGTERM, start)`);
        child.kill('SIGTERM');
        await exited(child);
        startPeer(id);
      }
    }
  };

  // Ranges follow the plan: sampled each second, a peer (up, not quarantined) holds only ranges
  // of the head's current and previous plan generation, or ranges loading, or — for at most
  // OFF_PLAN_GRACE_MS — a range a session still leases (it moves to the plan at its next step).
  const offPlanSince = new Map<string, number>();
  const quarantines = new Set<string>();
  let headInstance = 0;
  const sampler = setInterval(() => {
    if (!headUp) return;
    const instance = headInstance;
    void head.holds().then((h) => {
      if (instance !== headInstance) return;
      const now = Date.now();
      const perPeer = new Map<string, number>();
      for (const hold of h.holds) perPeer.set(hold.peerId, (perPeer.get(hold.peerId) ?? 0) + 1);
      report.mostRanges = Math.max(report.mostRanges, ...perPeer.values());
      const key = (x: { peerId: string; range: { start: number; end: number } }) => `${x.peerId}[${x.range.start},${x.range.end})`;
      const planned = new Set([...h.plans[0], ...h.plans[1]].map(key));
      const seen = new Set<string>();
      for (const hold of h.holds) {
        if (hold.quarantined || hold.loading || planned.has(key(hold))) continue;
        const k = `${instance} ${key(hold)}`;
        seen.add(k);
        if (hold.leases === 0) {
          report.rangeViolations.push(`${key(hold)} held, in neither recent plan (generation ${h.generation}: ${[...planned].join(' ')}), no lease`);
          continue;
        }
        const since = offPlanSince.get(k) ?? now;
        offPlanSince.set(k, since);
        report.offPlanLongestMs = Math.max(report.offPlanLongestMs, now - since);
        if (now - since > OFF_PLAN_GRACE_MS) report.rangeViolations.push(`${key(hold)} leased (${hold.leases}) off the recent plans for ${now - since} ms (generation ${h.generation}: ${[...planned].join(' ')})`);
      }
      for (const k of offPlanSince.keys()) if (!seen.has(k)) offPlanSince.delete(k);
      for (const hold of h.holds) if (hold.quarantine && !quarantines.has(`${hold.peerId} ${hold.quarantine}`)) quarantines.add(`${hold.peerId} ${hold.quarantine}`) && log(`quarantined: ${hold.peerId}: ${hold.quarantine}`);
      if (process.env.CHAOS_HOLDS && h.holds.some((x) => !planned.has(key(x)))) log(`holds g${h.generation}: ${h.holds.map((x) => `${key(x)}${planned.has(key(x)) ? ' pl' : ''}${x.current ? ' cur' : ''}${x.lastReady ? ' lr' : ''}${x.leases ? ` L${x.leases}` : ''}${x.loading ? ' ld' : ''}${x.quarantined ? ' Q' : ''}`).join(' | ')}`);
    }, () => {});
  }, 1000);

  let afterChaos: SoakMeasure | undefined;
  try {
    const chaosDone = chaos();
    await Promise.all([...Array.from({ length: options.clients }, (_, i) => client(i)), chaosDone]);
    chaosOn = false;
    clearInterval(sampler);
    for (const id of PEERS) peers.get(id)!.kill('SIGCONT');
    stopped.clear();
    await ready(PEERS.length, 60_000);
    afterChaos = await head.measure();
    const last = await completion(base);
    if (last.text !== golden.text) report.wrong.push(`after the chaos: ${last.text.slice(0, 120)}`);
    let settled = await head.measure();
    for (let i = 0; i < 100 && !isSettled(settled); i++) {
      await sleep(100);
      settled = await head.measure();
    }
    return { ...report, settled, heapAfterChaos: afterChaos.heapUsed, heapAtEnd: settled.heapUsed, rssAfterChaos: afterChaos.rss, rssAtEnd: settled.rss };
  } finally {
    chaosOn = false;
    clearInterval(sampler);
    for (const child of peers.values()) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
    await head.close().catch(() => {});
  }
}

async function completion(base: string): Promise<{ text: string; ids: number[] }> {
  const response = await fetch(`${base}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'stories260k', prompt: [1], max_tokens: STORIES_GOLDEN.length, temperature: 0 }) });
  const body = (await response.json()) as { choices: { text: string }[] };
  const text = body.choices[0]!.text;
  return { text, ids: text.trim().split(/\s+/).map((t) => Number(t.slice(1))) };
}

type Outcome = { kind: 'done'; text: string } | { kind: 'aborted' } | { kind: 'typed'; what: string } | { kind: 'untyped'; what: string } | { kind: 'unreachable' };

/** One streamed greedy completion; `abortAfter` chunks in, the client goes away. */
async function streamed(base: string, abortAfter: number | undefined): Promise<Outcome> {
  const abort = new AbortController();
  let response: Response;
  try {
    response = await fetch(`${base}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'stories260k', prompt: [1], max_tokens: STORIES_GOLDEN.length, temperature: 0, stream: true }), signal: abort.signal });
  } catch {
    return { kind: 'unreachable' };
  }
  if (response.status !== 200) return typedError(response.status, await response.text().catch(() => ''));
  let text = '';
  let chunks = 0;
  let buffer = '';
  try {
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const lines = buffer.slice(0, cut).split('\n').filter((l) => l.startsWith('data: '));
        buffer = buffer.slice(cut + 2);
        if (lines.length === 0) continue; // a comment (keep-alive)
        const event = lines.map((l) => l.slice(6)).join('\n');
        if (event === '[DONE]') return { kind: 'done', text };
        const json = JSON.parse(event) as { choices?: { text?: string }[]; error?: { code?: string; type?: string } };
        if (json.error) return json.error.type || json.error.code ? { kind: 'typed', what: `stream ${json.error.code ?? json.error.type}` } : { kind: 'untyped', what: event };
        text += json.choices?.[0]?.text ?? '';
        if (abortAfter !== undefined && ++chunks >= abortAfter) {
          abort.abort();
          return { kind: 'aborted' };
        }
      }
    }
    return { kind: 'untyped', what: `stream ended without [DONE] after ${JSON.stringify(text.slice(0, 40))}` };
  } catch (error) {
    return { kind: 'untyped', what: `stream broke: ${error instanceof Error ? error.message : String(error)}` };
  }
}

function typedError(status: number, body: string): Outcome {
  try {
    const json = JSON.parse(body) as { error?: { code?: string | null; type?: string; message?: string } };
    if (status < 500 || status === 503 || status === 504) {
      if (json.error?.message && (json.error.code || json.error.type)) return { kind: 'typed', what: `${status} ${json.error.code ?? json.error.type}` };
    }
  } catch {
    // not JSON: untyped
  }
  return { kind: 'untyped', what: `${status} ${body.slice(0, 200)}` };
}
