/**
 * Attention from plain ops over the pooled past in place (model/in-place-attention.ts) against
 * today's GroupQueryAttention graph, on onnxruntime-node's CPU provider and onnxruntime-web's
 * wasm (WebGPU keeps GQA's graph and its GPU buffers; test/kv/kv-pool.test.ts):
 *
 * - over 1,100 positions (prefill chunks of 100, then single steps, one rollback) its logits
 *   equal the GQA graph's within 1e-5 at every position;
 * - a prefill of 300 positions (three runs of ≤ 128) equals 300 sequential decode steps;
 * - one batched run mixing single-position entries with entries of several positions (a
 *   speculative verify of 4 drafts, a 7-position prefill chunk) gives each entry what it gets
 *   alone, and the several-position entries equal sequential decode; after a partial accept
 *   (rollback) the next batched round still equals the entries alone.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Activations } from '../../src/core/runtime/shard-executor.ts';
import type { OrtShardExecutor } from '../../src/core/runtime/ort-shard-executor.ts';
import { loadLocalPipeline, type LoadedPipeline } from '../../src/node/local-model.ts';
import { maxAbsDiff } from '../engine/harness.ts';
import { useKvModel } from './kv-model.ts';
import { referenceTokens, teacherForce } from './teacher-forcing.ts';

const POSITIONS = 1100;
const kv = useKvModel('in-place', 29, 1536);

const ranges = [{ start: 0, end: 1 }, { start: 1, end: 2 }];
const rows = (a: Activations, from: number, count: number) => a.data.subarray(from * a.hiddenSize, (from + count) * a.hiddenSize);

/** One step through every stage alone. */
async function alone(p: LoadedPipeline, sessionId: string, ids: number[], position: number): Promise<Activations> {
  let hidden: Activations = await p.head.embed(ids);
  for (const stage of p.stages) hidden = await stage.executor.run({ sessionId, startPosition: position, hidden }, stage.kv.acquire(sessionId, stage.executor.range));
  return hidden;
}

/** One batched run per stage of every entry. */
async function batched(p: LoadedPipeline, entries: { sessionId: string; ids: number[]; position: number }[]): Promise<Activations[]> {
  let hidden = await Promise.all(entries.map((e) => p.head.embed(e.ids)));
  for (const stage of p.stages) {
    const steps = entries.map((e, b) => ({ sessionId: e.sessionId, startPosition: e.position, hidden: hidden[b]! }));
    hidden = await stage.executor.batch!.run(steps, entries.map((e) => stage.kv.acquire(e.sessionId, stage.executor.range)));
  }
  return hidden;
}

describe('attention reading the pooled KV in place', () => {
  for (const device of ['cpu', 'wasm']) {
    it(`equals the GroupQueryAttention graph within 1e-5 on the logits over ${POSITIONS} positions (${device})`, async () => {
      const inPlace = await loadLocalPipeline(kv.model, { ranges, device, dtype: 'fp32', threads: 1, attention: 'in-place' });
      const gqa = await loadLocalPipeline(kv.model, { ranges, device, dtype: 'fp32', threads: 1 });
      try {
        expect(inPlace.stages.map((s) => (s.executor as OrtShardExecutor).mixesLengths)).toEqual([true, true]);
        expect(gqa.stages.map((s) => (s.executor as OrtShardExecutor).mixesLengths)).toEqual([false, false]);
        const tokens = referenceTokens(POSITIONS, kv.model.checkpoint.config.vocabSize, 11);
        const result = await teacherForce(inPlace, gqa, tokens, { chunk: 100, singleFrom: 900, rollbackAt: 1000, rollbackBy: 3, sessionId: randomUUID() });
        expect(result.steps).toBeGreaterThan(200);
        expect(result.maxDiff, `worst at position ${result.worstPosition}`).toBeLessThan(1e-5);
      } finally {
        await inPlace.dispose();
        await gqa.dispose();
      }
    }, 120_000);

    it(`a 300-position prefill and a batch mixing single- and several-position entries equal sequential decode and each entry alone (${device})`, async () => {
      const p = await loadLocalPipeline(kv.model, { ranges, device, dtype: 'fp32', threads: 1, attention: 'in-place' });
      try {
        const vocab = kv.model.checkpoint.config.vocabSize;
        // Prefill (runs of ≤ 128) against one position at a time.
        const prompt = referenceTokens(300, vocab, 3);
        const whole = await alone(p, 'prefill', prompt, 0);
        let worst = 0;
        for (let i = 0; i < prompt.length; i++) worst = Math.max(worst, maxAbsDiff(rows(whole, i, 1), (await alone(p, 'sequential', [prompt[i]!], i)).data));
        expect(worst, 'prefill against sequential decode').toBeLessThan(1e-5);

        // Four sessions at different lengths, each twice: one set runs batched, the other alone.
        const lengths = [37, 130, 5, 260];
        const entries = lengths.map((length, b) => ({ tokens: referenceTokens(length + 12, vocab, 20 + b), length }));
        for (const [b, e] of entries.entries()) {
          await alone(p, `batched-${b}`, e.tokens.slice(0, e.length), 0);
          await alone(p, `alone-${b}`, e.tokens.slice(0, e.length), 0);
        }
        const fed = [1, 4, 1, 7]; // entry 1: a speculative verify of 4 drafts; entry 3: a prefill chunk
        const round = entries.map((e, b) => ({ sessionId: `batched-${b}`, ids: e.tokens.slice(e.length, e.length + fed[b]!), position: e.length }));
        const out = await batched(p, round);
        for (const [b, e] of entries.entries()) {
          expect(out[b]!.tokens).toBe(fed[b]);
          // Alone, one position at a time: batched = alone, and several positions = sequential decode.
          for (let i = 0; i < fed[b]!; i++) {
            const one = await alone(p, `alone-${b}`, [e.tokens[e.length + i]!], e.length + i);
            expect(maxAbsDiff(rows(out[b]!, i, 1), one.data), `entry ${b} position ${i}`).toBeLessThan(1e-5);
          }
        }
        // Entry 1 accepts 2 of its 4 drafts: its next step starts 2 past its start (the KV is cut back).
        const next = entries.map((e, b) => e.length + (b === 1 ? 2 : fed[b]!));
        const second = entries.map((e, b) => ({ sessionId: `batched-${b}`, ids: [e.tokens[next[b]!]!], position: next[b]! }));
        const out2 = await batched(p, second);
        for (const [b, e] of entries.entries()) {
          const one = await alone(p, `alone-${b}`, [e.tokens[next[b]!]!], next[b]!);
          expect(maxAbsDiff(out2[b]!.data, one.data), `entry ${b} after the rollback`).toBeLessThan(1e-5);
        }
        for (const stage of p.stages) for (const [b] of entries.entries()) expect(stage.kv.find(`batched-${b}`, stage.executor.range)!.length).toBe(next[b]! + 1);
      } finally {
        await p.dispose();
      }
    }, 120_000);
  }
});
