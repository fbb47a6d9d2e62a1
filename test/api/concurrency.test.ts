/**
 * Concurrent requests over shared peer sockets: every session's frames travel on the same
 * relay (or direct) links, so their request ids must never collide; each stream gets the
 * same tokens it would get alone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPeer, type RunningPeer } from '../../src/node/peer/run-peer.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { STORIES_GOLDEN, tempDir } from '../engine/harness.ts';
import { clientFor, serveStories, storiesText } from './api-harness.ts';

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('concurrency');
  process.env.MESHNET_HOME = root.dir;
});
afterAll(() => root.remove());

describe.each(['relay', 'direct'] as const)('concurrent sessions over %s links', (link) => {
  let serving: ServingHead;
  const peers: RunningPeer[] = [];
  beforeAll(async () => {
    serving = await serveStories({ headLayers: 'none', link });
    for (const id of ['c-1', 'c-2']) {
      peers.push(
        await runPeer({ headUrl: serving.head.peerUrl, joinToken: serving.head.joinToken, device: 'cpu', memoryBudgetBytes: 2 ** 30, peerId: id, threads: 1, ...(link === 'direct' && { listenPort: 0 }) }),
      );
    }
    await serving.head.waitForPeers(2, 30_000);
  });
  afterAll(async () => {
    await serving.close();
    for (const peer of peers) await peer.close();
  });

  it('six streams at once each get the greedy tokens', async () => {
    const client = clientFor(serving);
    const texts = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const stream = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 32, temperature: 0, stream: true });
        let text = '';
        for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
        return text;
      }),
    );
    for (const text of texts) expect(text).toBe(storiesText(STORIES_GOLDEN));
    for (const peer of peers) expect(peer.shard.kvEntries).toBe(0);
  });
});
