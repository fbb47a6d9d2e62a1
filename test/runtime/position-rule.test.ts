/**
 * The peer's position rule (protocol 3.1), on a real ShardPeer running a stories260k shard:
 * a frame that starts below the session's KV length drops the positions from its start on
 * and runs (the rejected drafts of a speculative step), exactly as if they had never been
 * sent; one that starts above it is a cache miss. Both KV modes keep it: the pool (CPU,
 * wasm) and the replacing one a WebGPU tab uses (here on the CPU provider), whose truncation
 * only lowers the length the graph reads.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeFrame, encodeFrame } from '../../src/core/frames/frame-codec.ts';
import { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { loadShardExecutor } from '../../src/core/runtime/ort-loader.ts';
import type { Activations, ShardExecutor } from '../../src/core/runtime/shard-executor.ts';
import { getShardArtifact } from '../../src/node/artifact-cache.ts';
import { nodeLoaderOptions } from '../../src/node/ort-node-runtime.ts';
import { assignedWeights } from '../../src/core/peer/shard-loader.ts';
import type { AssignMessage } from '../../src/shared/control.ts';
import { configSummary } from '../../src/node/mesh-model.ts';
import { maxAbsDiff } from '../engine/harness.ts';
import { type StoriesContext, useStories } from '../route/route-harness.ts';

const stories = useStories('position-rule');

const RANGE = { start: 0, end: 5 };

function assign(): AssignMessage {
  return { kind: 'assign', modelKey: stories.ctx.model.key, model: 'stories260k', range: RANGE, dtype: 'fp32', artifactUrl: '/unused', config: configSummary(stories.ctx.model) };
}

/** A ShardPeer holding all of stories260k, its KV pooled (the default on CPU) or replaced per step (WebGPU's mode). */
async function peer(kvMode: 'pool' | 'replace' = 'pool'): Promise<ShardPeer> {
  const loader = {
    async load(message: AssignMessage): Promise<ShardExecutor> {
      const { artifact } = await getShardArtifact(stories.ctx.model.checkpoint, stories.ctx.model.key, { kind: 'layers', range: message.range }, message.dtype, assignedWeights(message));
      const options = await nodeLoaderOptions({ device: 'cpu', threads: 1, dtype: message.dtype });
      return loadShardExecutor(stories.ctx.model.checkpoint.config, artifact, stories.ctx.model.checkpoint.source, { ...options, kvMode }) as Promise<ShardExecutor>;
    },
  };
  const p = new ShardPeer({ loader, memoryBudgetBytes: 1 << 30 });
  expect((await p.handleControl(assign())).kind).toBe('ready');
  return p;
}

async function send(p: ShardPeer, sessionId: string, ids: number[], startPosition: number): Promise<Activations> {
  const reply = await p.handleFrame(encodeFrame({ kind: startPosition === 0 ? 'prefill' : 'decode', requestId: 1, sessionId, startPosition, range: RANGE, activations: await stories.ctx.head.embed(ids) }));
  if ('error' in reply) throw Object.assign(new Error(reply.error.message), { code: reply.error.code });
  return decodeFrame(reply.frame).activations;
}

const PROMPT = [1, 45, 67, 89, 123];

describe('the position rule', () => {
  it('a frame below the KV length drops the rejected positions, then equals a run that never had them', async () => {
    const p = await peer();
    const spec = randomUUID();
    await send(p, spec, PROMPT, 0);
    await send(p, spec, [200, 301, 17], 5); // a speculative step: positions 5, 6, 7
    const after = await send(p, spec, [64, 99], 6); // only position 5 was kept: 6 and 7 are dropped
    const plain = randomUUID();
    await send(p, plain, [...PROMPT, 200], 0);
    const expected = await send(p, plain, [64, 99], 6);
    expect(maxAbsDiff(after.data, expected.data)).toBeLessThan(1e-5);
    // And the next step continues from the kept positions.
    expect(maxAbsDiff((await send(p, spec, [7], 8)).data, (await send(p, plain, [7], 8)).data)).toBeLessThan(1e-5);
    await p.dispose();
  });

  it('a frame above the KV length is a cache miss and leaves the KV as it was', async () => {
    const p = await peer();
    const id = randomUUID();
    await send(p, id, PROMPT, 0);
    await expect(send(p, id, [7], 6)).rejects.toMatchObject({ code: 'cache_miss' });
    await expect(send(p, id, [7], 5)).resolves.toMatchObject({ tokens: 1 });
    await p.dispose();
  });

  it('KV replaced per step (how a WebGPU tab holds it) keeps the rule exactly too', async () => {
    const p = await peer('replace');
    const spec = randomUUID();
    await send(p, spec, PROMPT, 0);
    await send(p, spec, [200, 301, 17], 5);
    const after = await send(p, spec, [64, 99], 6); // 6 and 7 dropped
    const reference = await peer();
    const plain = randomUUID();
    await send(reference, plain, [...PROMPT, 200], 0);
    expect(maxAbsDiff(after.data, (await send(reference, plain, [64, 99], 6)).data)).toBeLessThan(1e-5);
    await p.dispose();
    await reference.dispose();
  });
});
