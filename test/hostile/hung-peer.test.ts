/**
 * A hung peer process, black-box: a head (stories260k, its own layers) and two `meshnet peer`
 * processes on loopback; mid-stream the peer serving one hop is SIGSTOPped (its socket stays
 * open, nothing answers). The hop's deadline follows its recent latency (a few ms here, so the
 * 1 s floor), not `--hop-timeout` (5 s, the ceiling): the stream's longest gap between two
 * tokens stays ≤ 1.5 s, the tokens are the one-process golden ids, and the stopped peer is
 * quarantined as hung. SIGCONT lets it go on afterwards.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { clientFor, eventually, serveStories } from '../api/api-harness.ts';
import { STORIES_GOLDEN, tempDir } from '../engine/harness.ts';

const GAP_BOUND_MS = 1500;

let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;

beforeAll(async () => {
  home = await tempDir('hung-peer');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  serving = await serveStories({ localPeers: 2, hopTimeoutMs: 5000, maxSessions: 8 });
  await serving.head.waitForPeers(2, 60_000);
  expect(await eventually(() => serving.head.mesh.routeReady() && serving.head.mesh.servingPlan().hops.length === 3, 60_000), 'head + 2 peers warm').toBe(true);
}, 90_000);
afterAll(async () => {
  for (const child of serving?.peers?.processes ?? []) child.kill('SIGCONT');
  await serving?.close();
  await home?.remove();
});

/** Streams [1] greedily; after `stopAfter` tokens calls `stop()`. Ids and the gaps between tokens. */
async function streamWithStop(stopAfter: number, stop: () => void): Promise<{ ids: number[]; gaps: number[] }> {
  const stream = await clientFor(serving).completions.create({ model: 'stories260k', prompt: [1], max_tokens: STORIES_GOLDEN.length, temperature: 0, stream: true });
  let text = '';
  const gaps: number[] = [];
  let last = performance.now();
  let tokens = 0;
  for await (const chunk of stream) {
    const piece = chunk.choices[0]?.text ?? '';
    if (!piece) continue;
    const now = performance.now();
    if (tokens > 0) gaps.push(now - last);
    last = now;
    text += piece;
    if (++tokens === stopAfter) stop();
  }
  return { ids: text.trim().split(/\s+/).map((t) => Number(t.slice(1))), gaps };
}

describe('a SIGSTOPped peer is replaced within its adaptive deadline', () => {
  it(`the longest gap between tokens ≤ ${GAP_BOUND_MS} ms, golden ids, the peer quarantined as hung`, { timeout: 60_000 }, async () => {
    const hop = serving.head.mesh.servingPlan().hops.find((h) => h.peerId !== 'head')!;
    const child = serving.peers!.processes[Number(hop.peerId.replace('local-', '')) - 1]!;
    // A few streams first: the hop's latency record (its p99) is that of a healthy loopback peer.
    for (let i = 0; i < 3; i++) expect((await streamWithStop(0, () => {})).ids).toEqual(STORIES_GOLDEN);
    const { ids, gaps } = await streamWithStop(8, () => child.kill('SIGSTOP'));
    try {
      expect(ids).toEqual(STORIES_GOLDEN);
      const quarantine = serving.head.mesh.peers.find((p) => p.id === hop.peerId)?.quarantine;
      expect(quarantine?.reason).toMatch(/^hung on layers /);
      const longest = Math.max(...gaps);
      console.log(`SIGSTOP of ${hop.peerId} (layers [${hop.range.start}, ${hop.range.end})): longest gap ${longest.toFixed(0)} ms, quarantine: ${quarantine?.reason}`);
      expect(longest, `gaps ${gaps.map(Math.round).join(', ')} ms`).toBeLessThanOrEqual(GAP_BOUND_MS);
    } finally {
      child.kill('SIGCONT');
    }
  });
});
