/**
 * Prefix soak (issue 27, "each prefix once"): rounds of greedy requests that share one
 * 200-token system prompt and differ in their question, through a real Mesh of two in-process
 * ShardPeers (real onnxruntime, stories260k) with the default `--prefix-cache` (256 MiB per
 * peer) and the head's PrefixRegistry at its defaults. After each round: the process RSS and
 * heap (head and peers share this process), the head's recorded-input bytes and entries, and
 * the peers' prefix bytes and entries. Memory should follow the distinct tokens: the shared
 * prompt held once per hop, so the figures stay flat once the registry is full.
 *
 *   npm run bench:prefix-soak -- --rounds 5 --requests 200 [--prefix-cache MB]   (0: prefix reuse off, for comparison)
 */
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { PrefixRegistry } from '../src/core/route/prefix-registry.ts';
import { RouteSession } from '../src/core/route/route-session.ts';
import { DEFAULT_PREFIX_CACHE_MB } from '../src/node/defaults.ts';
import type { StatsMessage } from '../src/shared/control.ts';
import { collect, greedy, inProcessMesh, openStories } from '../test/route/route-harness.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '4' }, requests: { type: 'string', default: '100' }, concurrency: { type: 'string', default: '4' }, 'prefix-cache': { type: 'string', default: String(DEFAULT_PREFIX_CACHE_MB) } } });
const rounds = Number(values.rounds);
const requests = Number(values.requests);
const concurrency = Number(values.concurrency);

const ctx = await openStories();
const prefixCacheMb = Number(values['prefix-cache']);
const m = inProcessMesh(ctx, 2, undefined, {}, prefixCacheMb * 2 ** 20);
const registry = new PrefixRegistry();
const prefixes = prefixCacheMb > 0 ? registry : undefined;
const vocab = ctx.model.checkpoint.config.vocabSize;
const SYSTEM = [1, ...Array.from({ length: 199 }, (_, i) => 3 + ((i * 37) % (vocab - 3)))];
let asked = 0;
const question = () => {
  const q = asked++;
  return Array.from({ length: 8 }, (_, i) => 3 + ((q * 131 + i * 17 + 7) % (vocab - 3)));
};

async function one(): Promise<void> {
  const session = new RouteSession(
    { head: ctx.head, route: m.mesh, vocabSize: vocab, policy: { backoff: { baseMs: 1, maxMs: 5 } }, prefixes },
    { sessionId: randomUUID(), promptIds: [...SYSTEM, ...question()], params: greedy(8) },
  );
  await collect(session);
  await session.closed;
}

const mib = (b: number) => (b / 2 ** 20).toFixed(1);
console.log(`prefix soak: ${rounds} rounds × ${requests} requests (${concurrency} at a time), --prefix-cache ${prefixCacheMb}, system prompt ${SYSTEM.length} tokens, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
for (let round = 1; round <= rounds; round++) {
  const started = Date.now();
  for (let i = 0; i < requests; i += concurrency) await Promise.all(Array.from({ length: Math.min(concurrency, requests - i) }, one));
  globalThis.gc?.();
  const mem = process.memoryUsage();
  const head = registry.stats();
  const peers = [...m.peers.values()].map((p) => p.stats() as StatsMessage);
  const peerBytes = peers.reduce((n, s) => n + (s.prefixBytes ?? 0), 0);
  const peerEntries = peers.map((s) => s.prefixEntries ?? 0).join('/');
  console.log(
    `round ${round}: rss ${mib(mem.rss)} MiB, heap ${mib(mem.heapUsed)} MiB, arrays ${mib(mem.arrayBuffers)} MiB; head entries ${head.entries}, recorded inputs ${mib(head.inputBytes)} MiB; peer entries ${peerEntries}, prefix KV ${mib(peerBytes)} MiB; hits ${head.hits}; ${((Date.now() - started) / 1000).toFixed(1)} s; load ${os.loadavg()[0].toFixed(1)}`,
  );
}
for (const p of m.peers.values()) await p.dispose();
process.exit(0);
