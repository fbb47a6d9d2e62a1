/**
 * `--min-peers N` / `--peer-wait S`: a request waits for N peers to join, then gets a 503
 * with a clear message; a peer that joins during the wait lets it through.
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

  it('lets a waiting request through when a peer joins during the wait', async () => {
    const request = clientFor(serving).completions.create({ model: serving.modelId, prompt: [1], max_tokens: 32, temperature: 0 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const peer = await runPeer({ headUrl: serving.head.peerUrl, joinToken: serving.head.joinToken, device: 'cpu', memoryBudgetBytes: 2 ** 30, peerId: 'late', threads: 1 });
    try {
      const reply = await request;
      expect(reply.choices[0].text).toBe(storiesText(STORIES_GOLDEN));
    } finally {
      await peer.close();
    }
  });
});
