/**
 * A pooled step longer than MAX_RUN_POSITIONS runs as consecutive onnxruntime runs (so the
 * CPU arena keeps one chunk's activations, not a whole prefill's): its hidden states equal
 * the unpooled path's single run within 1e-5 at every position, it leaves the KV holding
 * every position, and the decode steps after it equal the unpooled ones — on
 * onnxruntime-node's CPU provider and on onnxruntime-web's wasm.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MAX_RUN_POSITIONS } from '../../src/core/runtime/ort-shard-executor.ts';
import type { Activations } from '../../src/core/runtime/shard-executor.ts';
import { loadLocalPipeline, type LoadedPipeline } from '../../src/node/local-model.ts';
import { maxAbsDiff } from '../engine/harness.ts';
import { useKvModel } from './kv-model.ts';
import { referenceTokens } from './teacher-forcing.ts';

const PROMPT = 2 * MAX_RUN_POSITIONS + 45; // three runs, the last one partial
const kv = useKvModel('chunked', 23, 1024);

async function forward(p: LoadedPipeline, embedder: LoadedPipeline, sessionId: string, ids: number[], position: number): Promise<Activations> {
  let hidden: Activations = await embedder.head.embed(ids);
  for (const stage of p.stages) hidden = await stage.executor.run({ sessionId, startPosition: position, hidden }, stage.kv.acquire(sessionId, stage.executor.range));
  return hidden;
}

describe('pooled runs of a long step', () => {
  for (const device of ['cpu', 'wasm']) {
    it(`a ${PROMPT}-position prefill in runs of ${MAX_RUN_POSITIONS} equals one unpooled run within 1e-5, and decode after it too (${device})`, async () => {
      const ranges = [{ start: 0, end: 1 }, { start: 1, end: 2 }];
      const pooled = await loadLocalPipeline(kv.model, { ranges, device, dtype: 'fp32', threads: 1 });
      const reference = await loadLocalPipeline(kv.model, { ranges, device, dtype: 'fp32', threads: 1, kvMode: 'replace' });
      try {
        const sessionId = randomUUID();
        const tokens = referenceTokens(PROMPT + 8, kv.model.checkpoint.config.vocabSize, 5);
        const a = await forward(pooled, reference, sessionId, tokens.slice(0, PROMPT), 0);
        const b = await forward(reference, reference, sessionId, tokens.slice(0, PROMPT), 0);
        expect(a.tokens).toBe(PROMPT);
        expect(a.data.length).toBe(b.data.length);
        expect(a.data.every(Number.isFinite)).toBe(true);
        let worst = 0;
        for (let i = 0; i < PROMPT; i++) {
          const row = (x: Activations) => x.data.subarray(i * x.hiddenSize, (i + 1) * x.hiddenSize);
          worst = Math.max(worst, maxAbsDiff(row(a), row(b)));
        }
        expect(worst).toBeLessThan(1e-5);
        for (const stage of pooled.stages) expect(stage.kv.find(sessionId, stage.executor.range)!.length).toBe(PROMPT);
        for (let p = PROMPT; p < tokens.length; p++) {
          const x = await forward(pooled, reference, sessionId, [tokens[p]!], p);
          const y = await forward(reference, reference, sessionId, [tokens[p]!], p);
          expect(maxAbsDiff(x.data, y.data), `decode at ${p}`).toBeLessThan(1e-5);
        }
      } finally {
        await pooled.dispose();
        await reference.dispose();
      }
    }, 60_000);
  }
});
