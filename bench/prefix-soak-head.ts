/**
 * Head RSS soak (issue 27, "each prefix once"): `serveHead` over stories260k with no layers of
 * its own and two `meshnet peer` processes (`localPeers: 2`), both with `--prefix-cache` at its
 * default, so this process is the head alone. Rounds of greedy HTTP completions (the official
 * openai client) whose prompts share one 200-token system prompt and differ in their question.
 * After each round: this process's RSS, heap and array buffers, and the peers' prefix bytes and
 * entries as /metrics reports them (peer stats arrive every few seconds, so they may lag).
 *
 *   npm run bench:prefix-soak-head -- --rounds 5 --requests 200 [--prefix-cache MB]
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import { DEFAULT_PREFIX_CACHE_MB } from '../src/node/defaults.ts';
import { serveHead } from '../src/node/serve/serve-head.ts';
import { testHeadOptions } from '../test/fixtures/test-head.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '4' }, requests: { type: 'string', default: '100' }, concurrency: { type: 'string', default: '4' }, 'prefix-cache': { type: 'string', default: String(DEFAULT_PREFIX_CACHE_MB) } } });
const rounds = Number(values.rounds);
const requests = Number(values.requests);
const concurrency = Number(values.concurrency);
const prefixCacheMb = Number(values['prefix-cache']);
process.env.MESHNET_HOME ??= path.resolve('.cache/meshnet-home');

const serving = await serveHead(testHeadOptions({ headLayers: 'none', localPeers: 2, prefixCacheMb, maxSessions: 8 }));
const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
const vocab = 512;
const SYSTEM = [1, ...Array.from({ length: 199 }, (_, i) => 3 + ((i * 37) % (vocab - 3)))];
let asked = 0;
const question = () => {
  const q = asked++;
  return Array.from({ length: 8 }, (_, i) => 3 + ((q * 131 + i * 17 + 7) % (vocab - 3)));
};
const one = async () => {
  await client.completions.create({ model: 'stories260k', prompt: [...SYSTEM, ...question()], max_tokens: 8, temperature: 0 });
};
// Wait for the route (the peers load their ranges).
for (let tries = 0; ; tries++) {
  try {
    await one();
    break;
  } catch (error) {
    if (tries > 120) throw error;
    await new Promise((r) => setTimeout(r, 500));
  }
}
const metric = async (name: string) => {
  const text = await (await fetch(`${serving.head.url}metrics`)).text();
  return Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, 'm').exec(text)?.[1] ?? NaN);
};
const mib = (b: number) => (b / 2 ** 20).toFixed(1);
console.log(`head soak: ${rounds} rounds × ${requests} requests (${concurrency} at a time), --prefix-cache ${prefixCacheMb}, 2 peer processes, system prompt ${SYSTEM.length} tokens, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
for (let round = 1; round <= rounds; round++) {
  const started = Date.now();
  for (let i = 0; i < requests; i += concurrency) await Promise.all(Array.from({ length: Math.min(concurrency, requests - i) }, one));
  globalThis.gc?.();
  const mem = process.memoryUsage();
  const [bytes, entries] = [await metric('meshnet_prefix_cache_bytes'), await metric('meshnet_prefix_cache_entries')];
  console.log(`round ${round}: head rss ${mib(mem.rss)} MiB, heap ${mib(mem.heapUsed)} MiB, arrays ${mib(mem.arrayBuffers)} MiB; peers' prefix KV ${mib(bytes)} MiB in ${entries} entries; ${((Date.now() - started) / 1000).toFixed(1)} s; load ${os.loadavg()[0].toFixed(1)}`);
}
await serving.close();
process.exit(0);
