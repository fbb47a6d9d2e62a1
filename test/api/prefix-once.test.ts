/**
 * Each prefix once per hop, through the API: a head (no layers of its own, prefix cache on)
 * with two real in-process peers, each with a prefix budget. 100 identical greedy requests
 * (4 at a time) leave one prefix entry per hop — not one per request — and the same answer
 * every time; distinct prompts add one entry each; a prompt that extends a kept sequence
 * replaces that entry instead of adding a copy. Memory follows the distinct tokens.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { localShardLoader } from '../../src/node/local-shard-loader.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { tempDir } from '../engine/harness.ts';
import { clientFor, eventually, serveStories } from './api-harness.ts';

let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
const peers: ShardPeer[] = [];

beforeAll(async () => {
  home = await tempDir('prefix-once');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  serving = await serveStories({ headLayers: 'none', prefixCacheMb: 16, maxSessions: 8 });
  for (const id of ['p1', 'p2']) {
    const peer = new ShardPeer({ loader: localShardLoader(serving.head.model, { device: 'cpu', threads: 1 }), memoryBudgetBytes: 1 << 30, prefixBudgetBytes: 16 * 2 ** 20 });
    peers.push(peer);
    serving.head.mesh.addPeer({ id, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(peer) });
  }
  expect(await eventually(() => serving.head.mesh.routeReady() && serving.head.mesh.servingPlan().hops.length === 2, 20_000)).toBe(true);
}, 60_000);
afterAll(async () => {
  await serving?.close();
  await Promise.all(peers.map((p) => p.dispose()));
  await home?.remove();
});

async function prefixFigures(): Promise<{ entries: number[]; bytes: number[] }> {
  const stats = await Promise.all(peers.map((p) => p.handleControl({ kind: 'stats', id: 's', kvEntries: 0, kvBytes: 0, kvBudgetBytes: 0, tokensServed: 0, framesServed: 0 })));
  const s = stats as unknown as { prefixEntries: number; prefixBytes: number }[];
  return { entries: s.map((x) => x.prefixEntries), bytes: s.map((x) => x.prefixBytes) };
}

const promptOf = (from: number, n: number) => Array.from({ length: n }, (_, i) => 3 + ((from + i * 7) % 500));
const complete = async (prompt: number[]) => (await clientFor(serving).completions.create({ model: 'stories260k', prompt, max_tokens: 8, temperature: 0 })).choices[0]!.text;
/** Every session released (its KV kept or freed in the background). */
const settled = () => eventually(() => serving.head.sessions.live === 0 && serving.head.sessions.sessions.length === 0, 10_000);

describe('each prefix once per hop', () => {
  it('100 identical requests leave one prefix entry per hop; distinct prompts one each; an extension replaces', { timeout: 120_000 }, async () => {
    const prompt = promptOf(0, 40);
    const answers = new Set<string>();
    for (let round = 0; round < 25; round++) for (const text of await Promise.all([0, 1, 2, 3].map(() => complete(prompt)))) answers.add(text);
    expect(answers.size, 'one answer, every time').toBe(1);
    expect(await settled()).toBe(true);
    const once = await prefixFigures();
    expect(once.entries, 'prefix entries per hop after 100 identical requests').toEqual([1, 1]);
    for (const b of once.bytes) expect(b).toBeGreaterThan(0);

    // Three distinct prompts: one entry each, per hop.
    for (const from of [100, 200, 300]) await complete(promptOf(from, 40));
    expect(await settled()).toBe(true);
    const distinct = await prefixFigures();
    expect(distinct.entries).toEqual([4, 4]);

    // A prompt extending the first sequence (its prompt and answer, then more): it replaces that entry.
    const sequence = [...prompt, ...[...answers][0]!.trim().split(/\s+/).map((t) => Number(t.slice(1)))];
    await complete([...sequence, ...promptOf(400, 6)]);
    expect(await settled()).toBe(true);
    const extended = await prefixFigures();
    expect(extended.entries, 'the extension replaced its prefix').toEqual([4, 4]);
    // Memory follows the distinct sequences: four sequences of 48 positions hold four times one's bytes.
    for (let i = 0; i < 2; i++) expect(distinct.bytes[i]! / once.bytes[i]!).toBeCloseTo(4, 0);
    console.log(`prefix entries per hop: ${once.entries.join(', ')} after 100 identical requests (${once.bytes.map((b) => (b / 1024).toFixed(0)).join(', ')} KiB); ${extended.entries.join(', ')} after 3 distinct prompts and one extension`);
  });
});
