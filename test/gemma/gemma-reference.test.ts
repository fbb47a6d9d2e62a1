/**
 * Gemma 2 and Gemma 3 shard graphs against the pure-TypeScript reference (built from
 * modeling_gemma2.py / modeling_gemma3.py): random checkpoints with Hugging Face's config keys
 * and tensor names, tied and untied, F32/BF16/F16, windows smaller than the prompt. Logits
 * within 1e-4 in prefill and in decode steps past the window; greedy ids equal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadLocalPipeline } from '../../src/node/local-model.ts';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers } from '../reference/forward.ts';
import { buildGemmaCheckpointFiles, type GemmaCheckpointOptions } from '../fixtures/gemma-checkpoints.ts';
import { argmax, fixtureModelFromFiles, maxAbsDiff, referenceWeights, stepLogits, tempDir } from '../engine/harness.ts';

export const GEMMA_CASES: Record<string, GemmaCheckpointOptions> = {
  'gemma2 tied, softcaps, window 4 on every other layer': { version: 2, dtype: 'F32', tied: true, seed: 101, slidingWindow: 4 },
  'gemma2 untied BF16 sharded': { version: 2, dtype: 'BF16', tied: false, seed: 102, sharded: true, slidingWindow: 5, queryPreAttnScalar: 48 },
  'gemma3 tied, window 3, 1 global in 2, linear rope scaling': {
    version: 3, dtype: 'F32', tied: true, seed: 103, slidingWindow: 3, slidingWindowPattern: 2, ropeScaling: { rope_type: 'linear', factor: 8 },
  },
  'gemma3 untied BF16, layer_types, window 4': { version: 3, dtype: 'BF16', tied: false, seed: 104, slidingWindow: 4, numLayers: 6 },
  'gemma3 ForConditionalGeneration (language_model.*), F16': { version: 3, conditional: true, dtype: 'F16', tied: true, seed: 105, slidingWindow: 4, slidingWindowPattern: 3 },
  'gemma3 with attention and final softcaps': { version: 3, dtype: 'F32', tied: true, seed: 106, slidingWindow: 4, attnLogitSoftcapping: 2, finalLogitSoftcapping: 3 },
};

const PROMPT = [1, 17, 42, 99, 5, 64];
const DECODE = [7, 120, 33, 8];

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('gemma-reference');
  process.env.MESHNET_HOME = root.dir + '/home';
});
afterAll(() => root.remove());

describe('Gemma shard graphs vs the reference forward pass', () => {
  // In place too on the cases with softcaps and windows (the others differ from them in weights only).
  const inPlaceCases = new Set(['gemma2 tied, softcaps, window 4 on every other layer', 'gemma3 tied, window 3, 1 global in 2, linear rope scaling', 'gemma3 with attention and final softcaps']);
  for (const [name, options] of Object.entries(GEMMA_CASES)) for (const attention of inPlaceCases.has(name) ? (['gqa', 'in-place'] as const) : (['gqa'] as const)) {
    it(`${name} (${attention})`, async () => {
      const model = await fixtureModelFromFiles(root.dir, name.replace(/\W+/g, '-'), buildGemmaCheckpointFiles(options));
      const { config } = model.checkpoint;
      expect(config.gemma?.version).toBe(options.version);
      const weights = await referenceWeights(model.checkpoint);
      const all = { start: 0, end: config.numLayers };
      const p = await loadLocalPipeline(model, { ranges: [all], device: 'cpu', dtype: 'fp32', threads: 1, attention });
      // In place on every layer (windowed, softcapped ones too): a batch may then mix entry lengths.
      expect((p.stages[0].executor as unknown as { mixesLengths: boolean }).mixesLengths).toBe(attention === 'in-place');
      try {
        const kv = new ReferenceKvCache();
        const expectLogits = (ids: number[]) => {
          const hidden = referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv);
          return referenceHead(config, weights, hidden[hidden.length - 1]);
        };
        const prefill = await stepLogits(p, 's', PROMPT, 0);
        expect(maxAbsDiff(prefill, expectLogits(PROMPT))).toBeLessThan(1e-4);
        let position = PROMPT.length;
        for (const id of DECODE) {
          const logits = await stepLogits(p, 's', [id], position++);
          expect(maxAbsDiff(logits, expectLogits([id]))).toBeLessThan(1e-4);
        }
        // Greedy: 6 tokens from the graph equal 6 from the reference.
        const refKv = new ReferenceKvCache();
        let ids = PROMPT;
        const fromReference: number[] = [];
        const fromGraph: number[] = [];
        let at = 0;
        for (let step = 0; step < 6; step++) {
          const hidden = referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, refKv);
          const next = argmax(referenceHead(config, weights, hidden[hidden.length - 1]));
          fromReference.push(next);
          const graphNext = argmax(await stepLogits(p, 'greedy', ids, at));
          fromGraph.push(graphNext);
          at += ids.length;
          ids = [next];
        }
        expect(fromGraph).toEqual(fromReference);
      } finally {
        await p.dispose();
      }
    });
  }
});
