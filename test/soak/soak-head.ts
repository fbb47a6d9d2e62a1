/**
 * The head of a soak run, in a process of its own so its memory is only the head's: it
 * serves stories260k (`serveHead`, options as JSON in argv[2]) and answers IPC requests.
 * `{ kind: 'measure' }` → after forced garbage collections, the process's memory, the
 * Route Sessions still tracked, the slots held, and every peer's KV figures (`stats`);
 * `{ kind: 'holds' }` → the ranges the head counts loaded, what keeps each, its recent plans.
 * Run with `node --expose-gc --import tsx test/soak/soak-head.ts '<json>'`.
 */
import { writeHeapSnapshot } from 'node:v8';
import type { HeldRange } from '../../src/core/mesh/held-range.ts';
import type { RangeHold } from '../../src/core/mesh/mesh.ts';
import { serveHead, type ServeOptions } from '../../src/node/serve/serve-head.ts';

export interface SoakMeasure {
  readonly heapUsed: number;
  readonly heapTotal: number;
  readonly rss: number;
  readonly external: number;
  readonly arrayBuffers: number;
  readonly trackedSessions: number;
  readonly liveSessions: number;
  /** Per peer: KV figures (`stats`) and how many ranges the head counts loaded on it. */
  readonly peers: { id: string; kvEntries: number; kvBytes: number; ranges: number }[];
  readonly warnings: string[];
}

/** `{ kind: 'holds' }` → every loaded range and what keeps it, and the head's two recent plan generations (no GC, no peer round trip). */
export interface SoakHolds {
  readonly holds: RangeHold[];
  readonly generation: number;
  readonly plans: readonly [HeldRange[], HeldRange[]];
}

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('soak-head needs --expose-gc');
const warnings: string[] = [];
process.on('warning', (warning) => warnings.push(`${warning.name}: ${warning.message}`));

const options = JSON.parse(process.argv[2]!) as ServeOptions;
const serving = await serveHead({ ...options, log: (line) => process.stderr.write(`[head] ${line}\n`) });

async function measure(): Promise<SoakMeasure> {
  const peers = await Promise.all(
    serving.head.mesh.peers.map(async (peer) => {
      const answer = await peer.link.control({ kind: 'stats', kvEntries: 0, kvBytes: 0, kvBudgetBytes: 0, tokensServed: 0, framesServed: 0 });
      return answer.kind === 'stats' ? { id: peer.id, kvEntries: answer.kvEntries, kvBytes: answer.kvBytes, ranges: peer.ranges.length } : { id: peer.id, kvEntries: -1, kvBytes: -1, ranges: peer.ranges.length };
    }),
  );
  // Several rounds: finalizers and weak references free more on the next collection.
  for (let i = 0; i < 4; i++) {
    gc!();
    await new Promise((resolve) => setImmediate(resolve));
  }
  const m = process.memoryUsage();
  return {
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    rss: m.rss,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    trackedSessions: serving.head.sessions.sessions.length,
    liveSessions: serving.head.sessions.live,
    peers,
    warnings: [...warnings],
  };
}

process.on('message', (message: { kind: string; id: number }) => {
  if (message.kind === 'measure') {
    void measure().then(
      (result) => process.send!({ id: message.id, result }),
      (error: unknown) => process.send!({ id: message.id, error: String(error) }),
    );
  } else if (message.kind === 'holds') {
    const result: SoakHolds = { holds: serving.head.mesh.rangeHolds(), ...serving.head.mesh.recentPlans() };
    process.send!({ id: message.id, result });
  } else if (message.kind === 'snapshot') {
    gc!();
    process.send!({ id: message.id, result: writeHeapSnapshot((message as { path?: string }).path) });
  } else if (message.kind === 'close') {
    void serving.close().then(() => process.exit(0));
  }
});
await serving.head.waitForPeers(options.localPeers, 60_000);
process.send!({ kind: 'ready', url: serving.head.url });
