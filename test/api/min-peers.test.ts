/**
 * `--min-peers N` / `--peer-wait S`: a request waits for N peers to join, then gets a 503
 * with a clear message; a peer that joins during the wait lets it through. `/health` tells
 * the truth meanwhile: 503 with the reason while too few peers joined, 200 once they have;
 * `/health/live` is 200 throughout.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPeer } from '../../src/node/peer/run-peer.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { STORIES_GOLDEN, tempDir } from '../engine/harness.ts';
import { clientFor, serveStories, storiesText, thrown } from './api-harness.ts';

let root: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
beforeAll(async () => {
  root = await tempDir('min-peers');
  process.env.MESHNET_HOME = root.dir;
  serving = await serveStories({ headLayers: 'none', minPeers: 1, peerWaitSeconds: 3 });
});
afterAll(async () => {
  await serving.close();
  await root.remove();
});

describe('--min-peers', () => {
  it('answers 503 with a clear message when no peer joins within --peer-wait', async () => {
    const started = Date.now();
    const error = (await thrown(() => clientFor(serving).completions.create({ model: serving.modelId, prompt: [1], max_tokens: 4 }))) as { status: number; error: { message: string; code: string } };
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
    expect(error.status).toBe(503);
    expect(error.error.message).toMatch(/waited 3 s for 1 peer\(s\) to join, 0 did/);
  });

  it('/health is 503 with the reason while --min-peers is unmet; /health/live is 200', async () => {
    const response = await fetch(`${serving.head.url}health`);
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ status: 'unavailable', ready: false, reason: 'waiting for peers: 0 of the 1 that --min-peers asks for have joined', minPeers: 1, peers: [] });
    expect((await fetch(`${serving.head.url}health/live`)).status).toBe(200);
  });

  it('lets a waiting request through when a peer joins during the wait; /health turns 200', async () => {
    const request = clientFor(serving).completions.create({ model: serving.modelId, prompt: [1], max_tokens: 32, temperature: 0 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const peer = await runPeer({ headUrl: serving.head.peerUrl, joinToken: serving.head.joinToken, device: 'cpu', memoryBudgetBytes: 2 ** 30, peerId: 'late', threads: 1 });
    try {
      const reply = await request;
      expect(reply.choices[0].text).toBe(storiesText(STORIES_GOLDEN));
      const response = await fetch(`${serving.head.url}health`);
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ status: 'ok', ready: true, minPeers: 1, route: { ready: true, hops: [{ peerId: 'late', range: [0, 5] }] } });
    } finally {
      await peer.close();
    }
  });
});
