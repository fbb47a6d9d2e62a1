/**
 * Node peers run their ShardPeer in a worker thread (onnxruntime's run() blocks its thread):
 * the same tokens over relay and direct links, and releases reach the worker's KV.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningHead } from '../../src/node/head/head-node.ts';
import { runPeer, type RunningPeer } from '../../src/node/peer/run-peer.ts';
import { WorkerShardService } from '../../src/node/peer/worker-shard.ts';
import { STORIES_GOLDEN } from '../engine/harness.ts';
import { collect, greedy, openSession, useStories } from '../route/route-harness.ts';
import { JOIN_TOKEN, startStoriesHead } from './transport-harness.ts';

const stories = useStories('worker-peer');

describe.each(['relay', 'direct'] as const)('worker-thread peers over %s', (link) => {
  let head: RunningHead;
  const peers: RunningPeer[] = [];
  beforeAll(async () => {
    head = await startStoriesHead(stories.ctx, link);
    for (const id of ['w-1', 'w-2']) {
      peers.push(await runPeer({ headUrl: head.peerUrl, joinToken: JOIN_TOKEN, device: 'cpu', memoryBudgetBytes: 2 ** 30, peerId: id, threads: 1, worker: true, ...(link === 'direct' && { listenPort: 0 }) }));
    }
    await head.waitForPeers(2, 10_000);
  });
  afterAll(async () => {
    for (const peer of peers) await peer.close();
    await head.close();
  });

  it('generates the golden ids, and every worker frees the session', async () => {
    expect(peers.every((p) => p.shard instanceof WorkerShardService)).toBe(true);
    const session = openSession(stories.ctx, head.mesh, greedy());
    const { ids } = await collect(session);
    expect(ids).toEqual(STORIES_GOLDEN);
    await session.closed;
    expect(session.telemetry.releases.map((r) => r.freedEntries)).toEqual([1, 1]);
    for (const peer of peers) expect(peer.shard.kvEntries).toBe(0);
  });
});
