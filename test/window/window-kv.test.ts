/**
 * Sliding-window layers keep only their window's KV: across the window boundary and far past
 * it (several compactions, a chunked prefill longer than a run) the logits stay within 1e-4 of
 * the reference, the windowed layers' KV bytes stop growing (asserted) while full layers' grow,
 * batched decode equals alone, and a rollback behind what a window still holds is a cache miss.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WINDOW_BLOCK_POSITIONS, WINDOW_ROLLBACK_SLACK, replaceWindowPositions } from '../../src/core/runtime/kv-state.ts';
import { loadLocalPipeline } from '../../src/node/local-model.ts';
import { kvBytesBound, windowKvPositions } from '../../src/core/model/layer-attention.ts';
import { CacheMissError } from '../../src/core/runtime/shard-executor.ts';
import type { LocalModel } from '../../src/node/local-model.ts';
import { buildGemmaCheckpointFiles } from '../fixtures/gemma-checkpoints.ts';
import { TINY_PRESETS } from '../fixtures/checkpoints.ts';
import { tinyGptOssCheckpoint } from '../fixtures/gpt-oss-checkpoints.ts';
import { fixtureModel, fixtureModelFromFiles, maxAbsDiff, pipeline, referenceWeights, stepLogits, tempDir } from '../engine/harness.ts';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers } from '../reference/forward.ts';

const WINDOW = 5;
let root: { dir: string; remove: () => Promise<void> };
let gemma: LocalModel;
let mistral: LocalModel;
let gptOss: LocalModel;
beforeAll(async () => {
  root = await tempDir('window-kv');
  process.env.MESHNET_HOME = root.dir + '/home';
  gemma = await fixtureModelFromFiles(root.dir, 'gemma3', buildGemmaCheckpointFiles({ version: 3, dtype: 'F32', tied: true, seed: 301, slidingWindow: WINDOW, slidingWindowPattern: 2, numLayers: 4, hiddenSize: 32, intermediateSize: 48, headDim: 16, maxPositionEmbeddings: 1024 })),
  mistral = await fixtureModel(root.dir, 'mistral', { ...TINY_PRESETS.mistral, dtype: 'F32', seed: 302, slidingWindow: WINDOW, numLayers: 2, hiddenSize: 32, intermediateSize: 48, maxPositionEmbeddings: 1024 });
  const oss = tinyGptOssCheckpoint({ dtype: 'F32', seed: 303, slidingWindow: WINDOW, numLayers: 2, numExperts: 4 });
  gptOss = await fixtureModel(root.dir, 'gpt-oss', { ...oss, configOverrides: { ...oss.configOverrides, max_position_embeddings: 1024 } });
});
afterAll(() => root.remove());

const token = (i: number) => (i * 37 + 11) % 120;

describe('windowed KV', () => {
  for (const attention of ['gqa', 'in-place'] as const) it(`Gemma 3 (local and global layers): 300-position prefill, decode to 700, reference logits, windowed bytes bounded (${attention})`, async () => {
    const { config } = gemma.checkpoint;
    const weights = await referenceWeights(gemma.checkpoint);
    const all = { start: 0, end: config.numLayers };
    const p = await loadLocalPipeline(gemma, { ranges: [all], device: 'cpu', dtype: 'fp32', threads: 1, attention });
    expect((p.stages[0].executor as unknown as { mixesLengths: boolean }).mixesLengths).toBe(attention === 'in-place');
    try {
      const kv = new ReferenceKvCache();
      const reference = (ids: number[]) => referenceHead(config, weights, referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv).at(-1)!);
      const prompt = Array.from({ length: 300 }, (_, i) => token(i));
      expect(maxAbsDiff(await stepLogits(p, 's', prompt, 0), reference(prompt))).toBeLessThan(1e-4);
      const state = p.stages[0].kv.acquire('s', all);
      const bytesOf = (layers: number[]) => layers.reduce((n, l) => n + 2 * (state.past(l)!.key as { dims: readonly number[] }).dims.reduce((a, b) => a * b, 1) * 4, 0);
      const local = [0, 2]; // pattern 2: layers 0 and 2 slide, 1 and 3 are global
      const global = [1, 3];
      const bound = windowKvPositions(WINDOW, WINDOW_BLOCK_POSITIONS); // window - 1 + 64: attention reads the whole capacity
      const seen: { at: number; local: number; global: number }[] = [];
      for (let at = 300; at < 700; at++) {
        const logits = await stepLogits(p, 's', [token(at)], at);
        const expected = reference([token(at)]);
        if (at % 25 === 0 || at === 699) expect(maxAbsDiff(logits, expected), `position ${at}`).toBeLessThan(1e-4);
        for (const l of local) expect(state.capacityOf(l)).toBeLessThanOrEqual(bound);
        if (at % 100 === 99) seen.push({ at, local: bytesOf(local), global: bytesOf(global) });
      }
      // Windowed layers: the same bytes from the first check on; global layers keep growing.
      expect(new Set(seen.map((s) => s.local)).size).toBe(1);
      expect(seen.at(-1)!.global).toBeGreaterThan(seen[0].global);
      expect(state.offsetOf(0)).toBeGreaterThan(600);
      expect(state.offsetOf(1)).toBe(0);
      expect(state.bytes).toBe(bytesOf([...local, ...global]));
      expect(state.bytes).toBeLessThanOrEqual(kvBytesBound(config, all, 768, 4, WINDOW_BLOCK_POSITIONS)); // global layers at their 768-position capacity
      // A rollback of a few positions is served; one behind the window's held positions is a cache miss.
      kv.truncate(695);
      expect(maxAbsDiff(await stepLogits(p, 's', [token(695)], 695), reference([token(695)]))).toBeLessThan(1e-4);
      await expect(stepLogits(p, 's', [token(100)], 100)).rejects.toBeInstanceOf(CacheMissError);
    } finally {
      await p.dispose();
    }
  });

  // Replace mode is the GPU's (WebGPU keeps GroupQueryAttention): the in-place graph's replace path is covered in test/kv.
  for (const attention of ['gqa'] as const) it(`replace mode (each step returns the whole present, as KV on the GPU does): windowed layers trimmed on the device within the bound, reference logits (${attention})`, async () => {
    const { config } = gemma.checkpoint;
    const weights = await referenceWeights(gemma.checkpoint);
    const all = { start: 0, end: config.numLayers };
    const p = await loadLocalPipeline(gemma, { ranges: [all], device: 'cpu', dtype: 'fp32', threads: 1, kvMode: 'replace', attention });
    try {
      expect((p.stages[0].executor as unknown as { kvMode: string }).kvMode).toBe('replace');
      const kv = new ReferenceKvCache();
      const reference = (ids: number[]) => referenceHead(config, weights, referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv).at(-1)!);
      const prompt = Array.from({ length: 300 }, (_, i) => token(i));
      expect(maxAbsDiff(await stepLogits(p, 'r', prompt, 0), reference(prompt))).toBeLessThan(1e-4);
      const state = p.stages[0].kv.acquire('r', all);
      const bound = replaceWindowPositions(WINDOW); // window - 1 + 64, within the pool's window - 1 + 64
      expect(bound).toBeLessThanOrEqual(windowKvPositions(WINDOW, WINDOW_BLOCK_POSITIONS));
      // The 300-position prefill passed the bound: the windowed layers were trimmed at once.
      expect(state.offsetOf(0)).toBe(300 - (WINDOW - 1 + WINDOW_ROLLBACK_SLACK));
      expect(state.capacityOf(0)).toBe(WINDOW - 1 + WINDOW_ROLLBACK_SLACK);
      let trims = 0;
      for (let at = 300; at < 620; at++) {
        const before = state.offsetOf(0);
        const logits = await stepLogits(p, 'r', [token(at)], at);
        const expected = reference([token(at)]);
        if (at % 20 === 0 || at === 619 || state.offsetOf(0) !== before) expect(maxAbsDiff(logits, expected), `position ${at}`).toBeLessThan(1e-4);
        if (state.offsetOf(0) !== before) trims++;
        for (const l of [0, 2]) expect((state.past(l)!.key as { dims: readonly number[] }).dims[2]).toBeLessThanOrEqual(bound);
        for (const l of [1, 3]) expect((state.past(l)!.key as { dims: readonly number[] }).dims[2]).toBe(at + 1);
      }
      expect(trims).toBe(9); // 36 held positions grow past the bound (68) every 33 steps: 9 times in 320
      // A short rollback is served from what the window holds; one behind it is a cache miss.
      kv.truncate(615);
      expect(maxAbsDiff(await stepLogits(p, 'r', [token(615)], 615), reference([token(615)]))).toBeLessThan(1e-4);
      await expect(stepLogits(p, 'r', [token(100)], 100)).rejects.toBeInstanceOf(CacheMissError);
    } finally {
      await p.dispose();
    }
  });

  it('gpt-oss (sliding and full layers, sinks): its sliding layers keep only the window, logits equal the reference', async () => {
    const { config } = gptOss.checkpoint;
    expect(config.slidingLayers).toEqual([true, false]); // layer_types: sliding, full
    const weights = await referenceWeights(gptOss.checkpoint);
    const all = { start: 0, end: config.numLayers };
    const p = await pipeline(gptOss, [all]);
    try {
      const kv = new ReferenceKvCache();
      const reference = (ids: number[]) => referenceHead(config, weights, referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv).at(-1)!);
      const prompt = Array.from({ length: 200 }, (_, i) => token(i));
      expect(maxAbsDiff(await stepLogits(p, 'g', prompt, 0), reference(prompt))).toBeLessThan(1e-4);
      const state = p.stages[0].kv.acquire('g', all);
      const bound = windowKvPositions(WINDOW, WINDOW_BLOCK_POSITIONS);
      const sliding: number[] = [];
      const full: number[] = [];
      for (let at = 200; at < 640; at++) {
        const logits = await stepLogits(p, 'g', [token(at)], at);
        const expected = reference([token(at)]);
        if (at % 40 === 0 || at === 639) expect(maxAbsDiff(logits, expected), `position ${at}`).toBeLessThan(1e-4);
        expect(state.capacityOf(0)).toBeLessThanOrEqual(bound);
        if (at % 110 === 109) (sliding.push(state.capacityOf(0)), full.push(state.capacityOf(1)));
      }
      expect(new Set(sliding).size).toBe(1); // the sliding layer's room (so its bytes) stays put
      expect(full.at(-1)!).toBeGreaterThan(full[0]); // the full layer's grows with the context
      expect(state.offsetOf(0)).toBeGreaterThan(640 - bound);
      expect(state.offsetOf(1)).toBe(0);
      expect(state.bytes).toBeLessThanOrEqual(kvBytesBound(config, all, 768, 4, WINDOW_BLOCK_POSITIONS));
    } finally {
      await p.dispose();
    }
  });

  for (const attention of ['gqa', 'in-place'] as const) it(`Mistral (every layer windowed): the whole state stops growing; batched decode equals alone (${attention})`, async () => {
    const { config } = mistral.checkpoint;
    const all = { start: 0, end: config.numLayers };
    const p = await loadLocalPipeline(mistral, { ranges: [all], device: 'cpu', dtype: 'fp32', threads: 1, attention });
    try {
      const alone: Float32Array[] = [];
      for (let at = 0; at < 600; at++) alone.push(await stepLogits(p, 'a', [token(at)], at));
      const state = p.stages[0].kv.acquire('a', all);
      const bytesAt600 = state.bytes;
      for (let at = 600; at < 700; at++) await stepLogits(p, 'a', [token(at)], at);
      expect(state.bytes).toBe(bytesAt600);
      expect(state.bytes).toBeLessThanOrEqual(kvBytesBound(config, all, 700, 4, WINDOW_BLOCK_POSITIONS));
      expect(kvBytesBound(config, all, 700, 4, WINDOW_BLOCK_POSITIONS)).toBe(kvBytesBound(config, all, 100_000, 4, WINDOW_BLOCK_POSITIONS));
      // Two sessions at different lengths in one batched run equal each alone.
      const stage = p.stages[0];
      const b1 = stage.kv.acquire('b1', all);
      const b2 = stage.kv.acquire('b2', all);
      let h1 = await p.head.embed([token(0)]);
      for (let at = 0; at < 400; at++) {
        const [o] = await stage.executor.batch!.run([{ sessionId: 'b1', startPosition: at, hidden: await p.head.embed([token(at)]) }], [b1]);
        h1 = o;
      }
      for (let at = 0; at < 300; at++) await stage.executor.batch!.run([{ sessionId: 'b2', startPosition: at, hidden: await p.head.embed([token(at)]) }], [b2]);
      const [o1, o2] = await stage.executor.batch!.run(
        [
          { sessionId: 'b1', startPosition: 400, hidden: await p.head.embed([token(400)]) },
          { sessionId: 'b2', startPosition: 300, hidden: await p.head.embed([token(300)]) },
        ],
        [b1, b2],
      );
      expect(h1.tokens).toBe(1);
      // alone[k] is the logits after position k fed in the single session.
      expect(maxAbsDiff(await p.head.logits(o1), await stepLogits(p, 'check1', Array.from({ length: 401 }, (_, i) => token(i)), 0))).toBeLessThan(1e-4);
      expect(maxAbsDiff(await p.head.logits(o2), alone[300])).toBeLessThan(1e-4);
    } finally {
      await p.dispose();
    }
  });
});
