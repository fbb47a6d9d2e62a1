/**
 * Pipelined prefill. The schedule (pure, with stand-in hops): chunk j enters hop h once hop
 * h − 1 answered it and hop h answered chunk j − 1, so hops overlap; the first failure stops
 * the rest. Through real stories260k peers: the same logits as a sequential prefill (within
 * 1e-5, every step), and a peer lost, a cache miss or a cancellation in the middle of one.
 */
import { describe, expect, it } from 'vitest';
import { decodeFrame } from '../../src/core/frames/frame-codec.ts';
import { cutChunks, MIN_PREFILL_CHUNK, prefillChunkSize, runPipelined, type Chunk } from '../../src/core/route/pipelined-prefill.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import type { HeadRunner } from '../../src/core/runtime/ort-head-runner.ts';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';
import type { Activations } from '../../src/core/runtime/shard-executor.ts';
import type { ControlMessage } from '../../src/shared/control.ts';
import { maxAbsDiff } from '../engine/harness.ts';
import { deferred } from './peer-doubles.ts';
import { collect, greedy, inProcessMesh, openSession, useStories } from './route-harness.ts';

const block = (tokens: number): Activations => ({ dtype: 'fp32', data: Float32Array.from({ length: tokens * 2 }, (_, i) => i), tokens, hiddenSize: 2 });

describe('the schedule', () => {
  it('chunk sizes: about 4 per hop, never below the minimum, nothing cut for one hop', () => {
    expect(prefillChunkSize(1536, 2)).toBe(192);
    expect(prefillChunkSize(1536, 3)).toBe(128);
    expect(prefillChunkSize(1536, 1)).toBe(1536);
    expect(prefillChunkSize(2 * MIN_PREFILL_CHUNK - 1, 2)).toBe(2 * MIN_PREFILL_CHUNK - 1);
    expect(prefillChunkSize(200, 4)).toBe(MIN_PREFILL_CHUNK);
    expect(prefillChunkSize(1536, 2, 0)).toBe(1536);
    expect(prefillChunkSize(100, 2, 30)).toBe(30);
    expect(cutChunks(block(5), 10, 2).map((c) => [c.start, c.activations.tokens, c.activations.data[0]])).toEqual([[10, 2, 0], [12, 2, 4], [14, 1, 8]]);
  });

  it('hop 2 runs chunk 1 while hop 1 runs chunk 2; each hop sees its chunks in order, one at a time', async () => {
    const log: string[] = [];
    const pending = new Map<string, { resolve: () => void }>();
    const running = new Set<number>();
    const run = async (hop: number, chunk: Chunk) => {
      if (running.has(hop)) throw new Error(`hop ${hop} got two chunks at once`);
      running.add(hop);
      const name = `h${hop}c${chunk.start}`;
      log.push(`start ${name}`);
      const gate = deferred<void>();
      pending.set(name, gate);
      await gate.promise;
      running.delete(hop);
      log.push(`end ${name}`);
      return chunk.activations;
    };
    const chunks = cutChunks(block(3), 0, 1);
    const done = runPipelined(chunks, 2, run, new AbortController().signal);
    const finish = async (name: string) => {
      await new Promise((r) => setTimeout(r, 0));
      pending.get(name)!.resolve();
      await new Promise((r) => setTimeout(r, 0));
    };
    await finish('h0c0');
    await finish('h0c1'); // hop 0 ran chunk 1 while hop 1 holds chunk 0
    expect(log).toEqual(['start h0c0', 'end h0c0', 'start h0c1', 'start h1c0', 'end h0c1', 'start h0c2']);
    await finish('h1c0');
    await finish('h1c1');
    await finish('h0c2');
    await finish('h1c2');
    expect((await done).data).toEqual(chunks[2].activations.data);
  });

  it('the first failure stops the rest and is what the prefill throws', async () => {
    const started: string[] = [];
    const boom = new Error('hop 1 failed');
    const run = async (hop: number, chunk: Chunk, signal: AbortSignal) => {
      started.push(`h${hop}c${chunk.start}`);
      if (hop === 1) throw boom;
      await new Promise((r) => setTimeout(r, 5));
      signal.throwIfAborted();
      return chunk.activations;
    };
    await expect(runPipelined(cutChunks(block(4), 0, 1), 2, run, new AbortController().signal)).rejects.toBe(boom);
    expect(started).not.toContain('h0c3'); // hop 0 did not go on once hop 1 failed
  });
});

const stories = useStories('pipelined');

/** A 200-token prompt: 4 chunks of 64, 64, 64 and 8. */
const PROMPT = Array.from({ length: 200 }, (_, i) => 3 + ((i * 37) % 500));
const CHUNK = 64;

/** The real head, recording the logits of every step. */
function recordingHead(): { head: HeadRunner; logits: Float32Array[] } {
  const logits: Float32Array[] = [];
  const head: HeadRunner = {
    device: stories.ctx.head.device,
    embed: (ids) => stories.ctx.head.embed(ids),
    logits: async (hidden, rows) => {
      const out = await stories.ctx.head.logits(hidden, rows);
      logits.push(out.slice());
      return out;
    },
    dispose: async () => {},
  };
  return { head, logits };
}

/** Frames a hop was sent; `onFrame(n)` runs before the n-th is passed on. */
class WatchedLink implements PeerLink {
  readonly frames: { start: number; tokens: number }[] = [];
  onFrame?: (n: number) => void | Promise<void>;
  constructor(readonly inner: PeerLink) {}
  get closed(): Promise<void> {
    return this.inner.closed;
  }
  async request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    const { startPosition, activations } = decodeFrame(frame);
    this.frames.push({ start: startPosition, tokens: activations.tokens });
    await this.onFrame?.(this.frames.length);
    return this.inner.request(frame, signal);
  }
  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    return this.inner.control(message, signal);
  }
  close(reason?: string): Promise<void> {
    return this.inner.close(reason);
  }
}

async function generate(hops: number, prefillChunk: number, setup?: (links: Map<string, WatchedLink>, t: ReturnType<typeof inProcessMesh>) => void, signal?: AbortSignal) {
  const links = new Map<string, WatchedLink>();
  const t = inProcessMesh(stories.ctx, hops, (id, peer) => {
    const link = new WatchedLink(new InProcessLink(peer));
    links.set(id, link);
    return link;
  });
  setup?.(links, t);
  const { head, logits } = recordingHead();
  const session = openSession(stories.ctx, t.provider, greedy(8), signal, { head, prefillChunk }, PROMPT, 'off');
  const { ids } = await collect(session);
  return { ids, logits, links, session, t };
}

function expectSameLogits(a: Float32Array[], b: Float32Array[]): void {
  expect(a.length).toBe(b.length);
  a.forEach((logits, step) => expect(maxAbsDiff(logits, b[step]), `step ${step}`).toBeLessThan(1e-5));
}

describe('pipelined prefill through real peers', () => {
  for (const hops of [2, 3]) {
    it(`over ${hops} hops gives the logits of a sequential prefill, every step`, async () => {
      const sequential = await generate(hops, 0);
      const pipelined = await generate(hops, CHUNK);
      expect(pipelined.ids).toEqual(sequential.ids);
      expectSameLogits(pipelined.logits, sequential.logits);
      for (const link of pipelined.links.values()) expect(link.frames.slice(0, 4)).toEqual([0, 64, 128, 192].map((start) => ({ start, tokens: start === 192 ? 8 : 64 })));
      for (const link of sequential.links.values()) expect(link.frames[0]).toEqual({ start: 0, tokens: 200 });
    });
  }

  it('a peer lost in the middle is replaced and rebuilt from the chunks it had: identical output', async () => {
    const sequential = await generate(3, 0);
    const run = await generate(3, CHUNK, (links) => {
      // p2 vanishes as its third chunk arrives, while p1 is busy with the fourth or done.
      links.get('p2')!.onFrame = async (n) => {
        if (n === 3) await links.get('p2')!.close('peer vanished');
      };
    });
    expect(run.ids).toEqual(sequential.ids);
    expectSameLogits(run.logits, sequential.logits);
    const repair = run.session.telemetry.repairs.find((r) => r.kind === 'replaced')!;
    expect(repair).toMatchObject({ hop: 1, lostPeerId: 'p2', position: 192 });
    // The replacement was rebuilt from the recorded chunks [0, 192) in one frame, then went on.
    expect(run.links.get(repair.peerId)!.frames).toContainEqual({ start: 0, tokens: 192 });
  });

  it('a cache miss in the middle rebuilds that hop from its chunks: identical output', async () => {
    const sequential = await generate(2, 0);
    const run = await generate(2, CHUNK, (links, t) => {
      links.get('p2')!.onFrame = (n) => {
        if (n === 3) t.peers.get('p2')!.evictAll();
      };
    });
    expect(run.ids).toEqual(sequential.ids);
    expectSameLogits(run.logits, sequential.logits);
    expect(run.session.telemetry.repairs).toEqual([expect.objectContaining({ kind: 'cache_miss', hop: 1, position: 192 })]);
  });

  it('a cancellation in the middle sends no further chunk and releases every hop', async () => {
    const controller = new AbortController();
    let framesAtAbort = 0;
    let links!: Map<string, WatchedLink>;
    let mesh!: ReturnType<typeof inProcessMesh>;
    const frames = () => [...links.values()].reduce((sum, l) => sum + l.frames.length, 0);
    const attempt = generate(
      2,
      CHUNK,
      (l, t) => {
        links = l;
        mesh = t;
        l.get('p2')!.onFrame = (n) => {
          if (n === 2) {
            controller.abort(new Error('client went away'));
            framesAtAbort = frames();
          }
        };
      },
      controller.signal,
    );
    await expect(attempt).rejects.toThrow('client went away');
    await mesh.provider.allClosed();
    expect(frames()).toBe(framesAtAbort);
    for (const peer of mesh.peers.values()) expect(peer.kvEntries).toBe(0);
  });
});
