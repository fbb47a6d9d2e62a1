/**
 * One onnxruntime call at a time per browser executor: the RunQueue seam, and
 * OrtShardExecutor over a stand-in session that records how many runs overlap
 * (onnxruntime-web in Node runs wasm synchronously and never shows the overlap itself).
 */
import * as ort from 'onnxruntime-common';
import { describe, expect, it } from 'vitest';
import { presentKeyName, presentValueName, SHARD_OUTPUT_HIDDEN } from '../../src/core/model/shard-graph.ts';
import { KvState } from '../../src/core/runtime/kv-state.ts';
import { OrtShardExecutor, ortKvOps } from '../../src/core/runtime/ort-shard-executor.ts';
import type { OrtModule } from '../../src/core/runtime/ort-session.ts';
import { RunQueue } from '../../src/core/runtime/run-queue.ts';

describe('RunQueue', () => {
  it('runs jobs one at a time in arrival order; a rejection does not stop the queue', async () => {
    const queue = new RunQueue();
    const log: string[] = [];
    let active = 0;
    const job = (name: string, fail = false) => async () => {
      active++;
      expect(active).toBe(1);
      log.push(`start ${name}`);
      await new Promise((resolve) => setImmediate(resolve));
      log.push(`end ${name}`);
      active--;
      if (fail) throw new Error(name);
      return name;
    };
    const results = await Promise.allSettled([queue.run(job('a')), queue.run(job('b', true)), queue.run(job('c'))]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual(['a', 'b', 'c']);
    expect(log).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
    expect(queue.size).toBe(0);
  });
});

/** A stand-in InferenceSession for layers [0, 1) of a 4-wide model: counts overlapping runs. */
function countingSession() {
  const stats = { active: 0, maxActive: 0, runs: 0 };
  const session = {
    inputNames: ['hidden_states', 'past_key_values.0.key', 'past_key_values.0.value'],
    outputNames: [SHARD_OUTPUT_HIDDEN, presentKeyName(0), presentValueName(0)],
    async run(feeds: Record<string, ort.Tensor>) {
      stats.runs++;
      stats.active++;
      stats.maxActive = Math.max(stats.maxActive, stats.active);
      await new Promise((resolve) => setTimeout(resolve, 5));
      stats.active--;
      const hidden = feeds.hidden_states;
      const past = feeds['past_key_values.0.key'].dims[2];
      const total = past + hidden.dims[1];
      const kv = () => new ort.Tensor('float32', new Float32Array(total * 2), [1, 1, total, 2]);
      return { [SHARD_OUTPUT_HIDDEN]: hidden, [presentKeyName(0)]: kv(), [presentValueName(0)]: kv() };
    },
    async release() {},
  };
  return { session: session as unknown as ort.InferenceSession, stats };
}

describe('OrtShardExecutor with a run queue', () => {
  const config = { hiddenSize: 4, numKvHeads: 1, headDim: 2 };
  const module = ort as unknown as OrtModule;
  const step = (sessionId: string) => ({ sessionId, startPosition: 0, hidden: { dtype: 'fp32' as const, data: new Float32Array(8), tokens: 2, hiddenSize: 4 } });

  async function overlap(queue?: RunQueue): Promise<number> {
    const { session, stats } = countingSession();
    const executor = new OrtShardExecutor(module, session, config, { start: 0, end: 1 }, 'fp32', 'webgpu', { format: 'fp32', blockSize: 0, accuracyLevel: 0 }, 0, queue);
    const ops = ortKvOps(module, config, 'fp32');
    await Promise.all(['a', 'b', 'c'].map((id) => executor.run(step(id), new KvState(id, { start: 0, end: 1 }, ops))));
    expect(stats.runs).toBe(3);
    return stats.maxActive;
  }

  it('two sessions on one executor never run at once through the queue (and do without it)', async () => {
    expect(await overlap(new RunQueue())).toBe(1);
    expect(await overlap(undefined)).toBe(3);
  });
});
