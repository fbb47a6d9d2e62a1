/**
 * How batches form (unit tests of the BatchingLink and BatchingHeadRunner seams, over
 * recording doubles): steps that become ready in one turn — the sessions one batched answer
 * released — leave as one batch, instead of the first alone and the rest a round trip
 * later; a lone step still leaves alone.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeBatchFrame, encodeBatchFrame, isBatchFrame } from '../../src/core/frames/batch-frame-codec.ts';
import { decodeFrame, encodeFrame } from '../../src/core/frames/frame-codec.ts';
import { BatchingHeadRunner } from '../../src/core/runtime/batching-head.ts';
import { BatchingLink } from '../../src/core/mesh/batching-link.ts';
import type { Activations } from '../../src/core/runtime/shard-executor.ts';
import type { HeadRunner } from '../../src/core/runtime/ort-head-runner.ts';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';

const H = 4;
const RANGE = { start: 0, end: 2 };
const act = (x: number): Activations => ({ dtype: 'fp32', data: Float32Array.from({ length: H }, (_, i) => x + i), tokens: 1, hiddenSize: H });

/** Answers every frame with its activations plus one; records what it was sent (entries per request). */
function echoLink(): PeerLink & { sent: number[] } {
  const sent: number[] = [];
  const plus = (a: Activations): Activations => ({ ...a, data: (a.data as Float32Array).map((v) => v + 1) });
  return {
    sent,
    closed: new Promise(() => {}),
    async control() {
      throw new Error('not used');
    },
    async close() {},
    async request(bytes) {
      if (isBatchFrame(bytes)) {
        const f = decodeBatchFrame(bytes);
        sent.push(f.entries.length);
        return encodeBatchFrame({ ...f, kind: 'batch-result', entries: f.entries.map((e) => ({ sessionId: e.sessionId, startPosition: e.startPosition, activations: plus((e as { activations: Activations }).activations) })) });
      }
      const f = decodeFrame(bytes);
      sent.push(1);
      return encodeFrame({ ...f, kind: 'result', activations: plus(f.activations) });
    },
  };
}

const decodeStep = (x: number) => encodeFrame({ kind: 'decode', requestId: 0, sessionId: randomUUID(), startPosition: 5, range: RANGE, activations: act(x) });

describe('BatchingLink forms a batch from the steps of one turn', () => {
  it('four steps made ready in one turn leave as one batched frame, each answered with its own result', async () => {
    const inner = echoLink();
    const link = new BatchingLink(inner);
    const answers = await Promise.all([1, 10, 20, 30].map((x) => link.request(decodeStep(x))));
    expect(inner.sent).toEqual([4]);
    answers.forEach((bytes, i) => expect(Array.from(decodeFrame(bytes).activations.data)).toEqual(Array.from({ length: H }, (_, j) => [1, 10, 20, 30][i] + j + 1)));
  });

  it('sessions released together by one answer stay together at the next hop', async () => {
    const first = echoLink();
    const second = echoLink();
    const a = new BatchingLink(first);
    const b = new BatchingLink(second);
    // Each session awaits its first hop, then goes on to the second through a few more awaits.
    const session = async (x: number) => {
      const mid = await a.request(decodeStep(x));
      await Promise.resolve();
      const f = decodeFrame(mid);
      return b.request(encodeFrame({ ...f, kind: 'decode', requestId: 0 }));
    };
    await Promise.all([1, 2, 3, 4, 5].map(session));
    expect(first.sent).toEqual([5]);
    expect(second.sent).toEqual([5]);
  });

  it('a lone step leaves alone, as the caller sent it', async () => {
    const inner = echoLink();
    const link = new BatchingLink(inner);
    await link.request(decodeStep(1));
    await link.request(decodeStep(2));
    expect(inner.sent).toEqual([1, 1]);
  });

  it('steps for different layer ranges of one peer go in separate batches (the lane is the header\'s range)', async () => {
    const inner = echoLink();
    const link = new BatchingLink(inner);
    const other = { start: 2, end: 300 }; // an end above 255: both bytes of the u16 matter
    const step = (x: number, range = RANGE) => encodeFrame({ kind: 'decode', requestId: 0, sessionId: randomUUID(), startPosition: 5, range, activations: act(x) });
    const answers = await Promise.all([step(1), step(2, other), step(3), step(4, other), step(5, other)].map((bytes) => link.request(bytes)));
    expect([...inner.sent].sort()).toEqual([2, 3]);
    expect(answers.map((bytes) => decodeFrame(bytes).range.end)).toEqual([2, 300, 2, 300, 300]);
  });

  it('a step that does not decode leaves alone for the peer to refuse; the others still batch', async () => {
    const seen: number[] = [];
    const inner = echoLink();
    const refusing: PeerLink = {
      ...inner,
      async request(bytes) {
        if (!isBatchFrame(bytes)) {
          try {
            decodeFrame(bytes);
          } catch (error) {
            seen.push(bytes.byteLength);
            throw error;
          }
        }
        return inner.request(bytes);
      },
    };
    const link = new BatchingLink(refusing);
    const broken = decodeStep(9).slice(0, -4); // the payload is cut short
    const results = await Promise.allSettled([decodeStep(1), broken, decodeStep(2), decodeStep(3)].map((bytes) => link.request(bytes)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(seen).toEqual([broken.byteLength]);
    expect(inner.sent).toEqual([3]);
  });
});

describe('BatchingHeadRunner forms a batch from the calls of one turn', () => {
  it('four logits calls in one turn are one batched run', async () => {
    const runs: number[] = [];
    const inner: HeadRunner = {
      device: 'cpu',
      embed: async () => act(0),
      logits: async (h) => (runs.push(1), Float32Array.of(h.data[0])),
      logitsBatch: async (hs) => (runs.push(hs.length), hs.map((h) => Float32Array.of(h.data[0]))),
      dispose: async () => {},
    };
    const head = new BatchingHeadRunner(inner);
    const rows = await Promise.all([3, 1, 4, 1].map((x) => head.logits(act(x))));
    expect(runs).toEqual([4]);
    expect(rows.map((r) => r[0])).toEqual([3, 1, 4, 1]);
    await head.logits(act(9));
    expect(runs).toEqual([4, 1]);
  });
});
