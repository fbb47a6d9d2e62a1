/**
 * A client that disconnects mid-stream cancels its Route Session: every hop drops the
 * session's KV, the session slot is freed, and the dashboard records it as cancelled.
 * The head holds no layers; two peers split the model between them: in-process peers (one
 * gated, so the stream is certainly live when the client leaves), then real `runPeer` peers
 * over relay sockets.
 */
import path from 'node:path';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { localShardLoader } from '../../src/node/local-shard-loader.ts';
import { runPeer, type RunningPeer } from '../../src/node/peer/run-peer.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { tempDir } from '../engine/harness.ts';
import { GateLink } from '../route/peer-doubles.ts';
import { clientFor, eventually, GatedLink, serveStories } from './api-harness.ts';

let home: { dir: string; remove: () => Promise<void> };
let serving: ServingHead;
let client: OpenAI;
const peers: ShardPeer[] = [];
const links: GatedLink[] = [];
let socketServing: ServingHead | undefined;
const socketPeers: RunningPeer[] = [];

beforeAll(async () => {
  home = await tempDir('api-disconnect');
  process.env.MESHNET_HOME = path.join(home.dir, 'home');
  serving = await serveStories({ headLayers: 'none' });
  for (const id of ['p1', 'p2']) {
    const peer = new ShardPeer({ loader: localShardLoader(serving.head.model, { device: 'cpu', threads: 1 }), memoryBudgetBytes: 1 << 30 });
    const link = new GatedLink(new InProcessLink(peer), Infinity);
    peers.push(peer);
    links.push(link);
    serving.head.mesh.addPeer({ id, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link });
  }
  client = clientFor(serving);
});

afterAll(async () => {
  await serving?.close();
  await Promise.all(peers.map((p) => p.dispose()));
  await socketServing?.close();
  await Promise.all(socketPeers.map((p) => p.close()));
  await home?.remove();
});

const kvEntries = () => peers.map((p) => p.kvEntries);

describe('client disconnect', () => {
  it('the route spans both peers', async () => {
    const completion = await client.completions.create({ model: 'stories260k', prompt: [1], max_tokens: 4, temperature: 0 });
    expect(completion.choices[0].text).toBe('t461 t461 t401 t401');
    expect(serving.head.mesh.plan().hops.map((h) => h.peerId)).toEqual(['p1', 'p2']);
    // A finished session closes its KV on every hop too.
    expect(await eventually(() => kvEntries().every((n) => n === 0))).toBe(true);
  });

  it.each([
    ['chat', true],
    ['completions', false],
  ] as const)('aborting a %s stream after a few chunks frees the session on every hop', async (_, chat) => {
    // The last hop holds frames after 4, so the stream is certainly still running when the client leaves.
    links[1].hold(4);
    const controller = new AbortController();
    const request = { model: 'stories260k', max_tokens: 200, temperature: 0, stream: true as const };
    const stream = chat
      ? await client.chat.completions.create({ ...request, messages: [{ role: 'user', content: 'Hello' }] }, { signal: controller.signal })
      : await client.completions.create({ ...request, prompt: [1] }, { signal: controller.signal });
    let chunks = 0;
    // The client ends the iteration quietly when its own signal aborts it (openai's Stream).
    for await (const _chunk of stream as AsyncIterable<unknown>) {
      if (++chunks === 3) {
        expect(serving.tracker.liveSessions).toBe(1);
        expect(kvEntries()).toEqual([1, 1]);
        controller.abort();
      }
    }
    expect(chunks).toBe(3);

    expect(await eventually(() => serving.tracker.liveSessions === 0 && kvEntries().every((n) => n === 0))).toBe(true);
    expect(serving.store.state.sessions).toEqual([]);
    const finished = serving.store.state.finished[0];
    expect(finished.state).toBe('cancelled');
    expect(finished.id).toMatch(chat ? /^chatcmpl-/ : /^cmpl-/);
    links[1].release();

    // The mesh still serves afterwards.
    const after = await client.completions.create({ model: 'stories260k', prompt: [1], max_tokens: 2, temperature: 0 });
    expect(after.choices[0].text).toBe('t461 t461');
  });
});

describe('client disconnect over relay sockets (runPeer peers)', () => {
  it('aborting a stream frees the session on both remote peers', async () => {
    socketServing = await serveStories({ headLayers: 'none', link: 'relay' });
    for (const peerId of ['r1', 'r2']) {
      socketPeers.push(
        await runPeer({ headUrl: socketServing.head.peerUrl, joinToken: socketServing.head.joinToken, device: 'cpu', memoryBudgetBytes: 1 << 30, peerId, threads: 1 }),
      );
    }
    await socketServing.head.waitForPeers(2, 10_000);
    const remoteClient = clientFor(socketServing);
    const kv = () => socketPeers.map((p) => p.shard.kvEntries);

    const warm = await remoteClient.completions.create({ model: 'stories260k', prompt: [1], max_tokens: 2, temperature: 0 });
    expect(warm.choices[0].text).toBe('t461 t461');
    expect(socketServing.head.mesh.plan().hops.map((h) => h.peerId)).toEqual(['r1', 'r2']);

    const controller = new AbortController();
    // Near the whole context (512): far longer than the few chunks read before the abort.
    const stream = await remoteClient.completions.create(
      { model: 'stories260k', prompt: [1], max_tokens: 500, temperature: 0, stream: true },
      { signal: controller.signal },
    );
    let chunks = 0;
    for await (const _chunk of stream) {
      if (++chunks === 3) {
        expect(kv()).toEqual([1, 1]);
        controller.abort();
      }
    }
    expect(await eventually(() => socketServing!.tracker.liveSessions === 0 && kv().every((n) => n === 0))).toBe(true);
    const finished = socketServing.store.state.finished[0];
    expect(finished.state).toBe('cancelled');
    expect(finished.completionTokens).toBeLessThan(500);
  });
});

describe('--max-sessions 1: a retry right after a disconnect', () => {
  // The head frees the slot in the abort the disconnect causes (the session table's own test
  // retries in the same tick). Over HTTP the retry is sent once the head has seen the
  // disconnect — the hop's releases are held back all along, so a slot that waited for them
  // would never come free.
  it('is admitted 20 times out of 20 while the hop holds its releases back', async () => {
    const one = await serveStories({ headLayers: 'none', maxSessions: 1 });
    const peer = new ShardPeer({ loader: localShardLoader(one.head.model, { device: 'cpu', threads: 1 }), memoryBudgetBytes: 1 << 30 });
    // The peer holds its releases back, as a slow hop would: the slot must not wait for them.
    const gate = new GateLink(new InProcessLink(peer));
    gate.holdReleases = true;
    one.head.mesh.addPeer({ id: 'p1', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: gate });
    const oneClient = clientFor(one);
    try {
      let admitted = 0;
      const freedMs: number[] = [];
      for (let trial = 0; trial < 20; trial++) {
        const controller = new AbortController();
        const stream = await oneClient.completions.create({ model: 'stories260k', prompt: [1], max_tokens: 400, temperature: 0, stream: true }, { signal: controller.signal });
        let chunks = 0;
        for await (const _chunk of stream) if (++chunks === 2) controller.abort();
        const aborted = performance.now();
        expect(await eventually(() => one.tracker.liveSessions === 0, 2000)).toBe(true);
        freedMs.push(performance.now() - aborted);
        const status = await oneClient.completions.create({ model: 'stories260k', prompt: [1], max_tokens: 1, temperature: 0 }).then(
          () => 200,
          (error: { status?: number }) => error.status,
        );
        if (status === 200) admitted++;
      }
      expect(admitted).toBe(20);
      expect(peer.kvEntries).toBeGreaterThanOrEqual(20); // every release was still held back
      console.log(`slot free after a disconnect, as the client polls it: ${freedMs.map((ms) => ms.toFixed(0)).join(', ')} ms`);
    } finally {
      gate.letReleasesThrough();
      await one.close();
      await peer.dispose();
    }
  });
});
