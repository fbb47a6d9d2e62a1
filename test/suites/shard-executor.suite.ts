/**
 * The ShardExecutor conformance suite (src/core/runtime/shard-executor.ts states the
 * contract). Every implementation runs it (test/runtime/shard-executors.test.ts): the
 * onnxruntime executor on onnxruntime-node with pooled KV and with replaced KV, with q4
 * weights, and on onnxruntime-web's wasm runtime (the browser peer's) in Node. A fixture gives
 * a fresh executor for layers [0, 2) of stories260k; the suite owns and disposes it.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { WeightSpec } from '../../src/core/model/quant/weight-format.ts';
import { KvState } from '../../src/core/runtime/kv-state.ts';
import { CacheMissError, type Activations, type ShardExecutor } from '../../src/core/runtime/shard-executor.ts';

export const EXECUTOR_RANGE = { start: 0, end: 2 } as const;

export interface ShardExecutorFixture {
  readonly executor: ShardExecutor;
  /** The weight format it was loaded with. */
  readonly weights: WeightSpec;
  readonly hiddenSize: number;
  /** Largest difference allowed between two ways of computing the same positions. */
  readonly tolerance: number;
}

/** Deterministic finite activations of `tokens` positions, distinct per `seed`. */
function hidden(hiddenSize: number, tokens: number, seed: number): Activations {
  const data = Float32Array.from({ length: tokens * hiddenSize }, (_, i) => Math.sin(seed * 5.31 + i * 0.29) * 0.5);
  return { dtype: 'fp32', data, tokens, hiddenSize };
}

/** Positions `from` … `to - 1` of a block. */
function slice(a: Activations, from: number, to: number): Activations {
  return { ...a, data: a.data.slice(from * a.hiddenSize, to * a.hiddenSize), tokens: to - from };
}

function maxDiff(a: Activations, b: Activations): number {
  expect([a.tokens, a.hiddenSize, a.data.length]).toEqual([b.tokens, b.hiddenSize, b.data.length]);
  let max = 0;
  for (let i = 0; i < a.data.length; i++) max = Math.max(max, Math.abs(a.data[i] - b.data[i]));
  return max;
}

/**
 * `batched`: whether the implementation has batched runs of two or more entries (the pooled
 * KV does; the replaced KV, the WebGPU path's, runs one entry at a time). Stated by the caller,
 * so a batching that disappears, or appears untested, fails here instead of being skipped.
 */
export function shardExecutorSuite(name: string, factory: () => Promise<ShardExecutorFixture>, batched = true): void {
  describe(`ShardExecutor conformance: ${name}`, () => {
    let f: ShardExecutorFixture;
    let states: KvState<unknown>[];
    const kvFor = (sessionId: string) => {
      const kv = new KvState(sessionId, f.executor.range, f.executor.kvOps);
      states.push(kv);
      return kv;
    };
    const run = (sessionId: string, startPosition: number, block: Activations, kv: KvState<unknown>) => f.executor.run({ sessionId, startPosition, hidden: block }, kv);

    beforeEach(async () => {
      f = await factory();
      states = [];
    });
    afterEach(async () => {
      for (const kv of states) kv.dispose();
      await f.executor.dispose();
    });

    it('says what it holds: its range, a device, the weight format and its bytes', () => {
      expect(f.executor.range).toEqual(EXECUTOR_RANGE);
      expect(f.executor.loaded.device).toMatch(/^[a-z]+$/);
      expect(f.executor.loaded.weights).toEqual(f.weights);
      expect(f.executor.loaded.weightsBytes).toBeGreaterThan(0);
    });

    it('a prefill answers one finite hidden state per position and appends them to the KV', async () => {
      const kv = kvFor('prefill');
      const out = await run('prefill', 0, hidden(f.hiddenSize, 3, 1), kv);
      expect([out.dtype, out.tokens, out.hiddenSize, out.data.length]).toEqual(['fp32', 3, f.hiddenSize, 3 * f.hiddenSize]);
      expect(out.data.every(Number.isFinite)).toBe(true);
      expect(kv.length).toBe(3);
    });

    it('decode by step equals the prefill of the same positions', async () => {
      const input = hidden(f.hiddenSize, 4, 2);
      const whole = await run('whole', 0, input, kvFor('whole'));
      const kv = kvFor('steps');
      for (let p = 0; p < 4; p++) {
        const out = await run('steps', p, slice(input, p, p + 1), kv);
        expect(maxDiff(out, slice(whole, p, p + 1)), `position ${p}`).toBeLessThan(f.tolerance);
      }
      expect(kv.length).toBe(4);
    });

    it('a KV longer than the start is truncated there first (a re-run of the same positions answers the same)', async () => {
      const input = hidden(f.hiddenSize, 3, 3);
      const kv = kvFor('again');
      const first = await run('again', 0, input, kv);
      const again = await run('again', 1, slice(input, 1, 3), kv);
      expect(maxDiff(again, slice(first, 1, 3))).toBeLessThan(f.tolerance);
      expect(kv.length).toBe(3);
    });

    it('a KV shorter than the start is a CacheMissError naming the session', async () => {
      const kv = kvFor('short');
      await run('short', 0, hidden(f.hiddenSize, 2, 4), kv);
      const error = await run('short', 5, hidden(f.hiddenSize, 1, 5), kv).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CacheMissError);
      expect(error).toMatchObject({ sessionId: 'short', held: 2, needed: 5 });
    });

    it('activations of another hidden size are a RangeError', async () => {
      await expect(run('wide', 0, hidden(f.hiddenSize + 1, 1, 6), kvFor('wide'))).rejects.toThrow(RangeError);
    });

    if (!batched) {
      it('has no batched runs of two or more entries: the peer runs entries one by one', () => {
        expect(f.executor.batch === undefined || f.executor.batch.max < 2, `batch.max ${f.executor.batch?.max}`).toBe(true);
      });
      return;
    }

    it('a batched run equals each session run alone; a cache miss in it runs nothing', async () => {
      const batch = f.executor.batch;
      expect(batch, 'a batched run').toBeDefined();
      if (!batch) return;
      expect(batch.max).toBeGreaterThanOrEqual(2);
      const prompts = [2, 5];
      const alone: Activations[] = [];
      const steps = [];
      const kvs = [];
      for (const [i, n] of prompts.entries()) {
        for (const id of [`alone-${i}`, `batch-${i}`]) await run(id, 0, hidden(f.hiddenSize, n, 10 + i), kvFor(id));
        const next = hidden(f.hiddenSize, 1, 20 + i);
        alone.push(await run(`alone-${i}`, n, next, states.find((s) => s.sessionId === `alone-${i}`)!));
        steps.push({ sessionId: `batch-${i}`, startPosition: n, hidden: next });
        kvs.push(states.find((s) => s.sessionId === `batch-${i}`)!);
      }
      const outs = await batch.run(steps, kvs);
      outs.forEach((out, i) => expect(maxDiff(out, alone[i]), `session ${i}`).toBeLessThan(f.tolerance));
      expect(kvs.map((kv) => kv.length)).toEqual([3, 6]);
      const missing = [steps[0], { ...steps[1], startPosition: 9 }];
      await expect(batch.run(missing, kvs)).rejects.toBeInstanceOf(CacheMissError);
      expect(kvs.map((kv) => kv.length), 'nothing ran').toEqual([3, 6]);
    });
  });
}
