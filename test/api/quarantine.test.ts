/**
 * A faulty peer behind a real head: the request is still answered with the one-process
 * tokens (the hop replaced), and `/api/state` shows the peer quarantined with its reason,
 * while `/health`'s route leaves it out.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { localShardLoader } from '../../src/node/local-shard-loader.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { STORIES_GOLDEN, tempDir } from '../engine/harness.ts';
import { FaultyPeer } from '../route/peer-doubles.ts';
import { clientFor, serveStories, storiesText } from './api-harness.ts';

let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
const peers: ShardPeer[] = [];

beforeAll(async () => {
  home = await tempDir('api-quarantine');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  serving = await serveStories({ headLayers: 'none' });
  for (const id of ['p1', 'p2']) {
    const peer = new ShardPeer({ loader: localShardLoader(serving.head.model, { device: 'cpu', threads: 1 }), memoryBudgetBytes: 1 << 30 });
    peers.push(peer);
    const service = id === 'p1' ? new FaultyPeer(peer, 'internal', 3) : peer;
    serving.head.mesh.addPeer({ id, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(service) });
  }
});

afterAll(async () => {
  await serving?.close();
  await Promise.all(peers.map((p) => p.dispose()));
  await home?.remove();
});

describe('a faulty peer behind the API', () => {
  it('the completion is answered with the one-process tokens; /api/state shows the peer quarantined; /health routes around it', async () => {
    const completion = await clientFor(serving).completions.create({ model: 'stories260k', prompt: [1], max_tokens: 32, temperature: 0 });
    expect(completion.choices[0].text).toBe(storiesText(STORIES_GOLDEN));
    const state = await (await fetch(`${serving.head.url}api/state`)).json();
    const p1 = state.peers.find((p: { id: string }) => p.id === 'p1');
    expect(p1).toMatchObject({ status: 'quarantined', quarantine: { strikes: 1, reason: expect.stringMatching(/^faulty on layers \[0, 3\): the peer answered internal: GPU out of memory/) } });
    expect(p1.quarantine.until).toBeGreaterThan(Date.now());
    expect(state.finished[0].repairs).toEqual([expect.objectContaining({ kind: 'replaced', lostPeerId: 'p1', peerId: 'p2' })]);
    // /health reports the route requests take: p2 alone, once its new range is warm.
    const route = async () => ((await (await fetch(`${serving.head.url}health`)).json()) as { route: { hops?: { peerId: string }[] } }).route.hops?.map((h) => h.peerId);
    let hops = await route();
    for (let i = 0; i < 100 && hops?.join() !== 'p2'; i++) hops = await new Promise((resolve) => setTimeout(resolve, 50)).then(route);
    expect(hops).toEqual(['p2']);
  });
});
