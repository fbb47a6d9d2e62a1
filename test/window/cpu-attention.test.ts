/**
 * The attention each runtime builds by default (issue 22): onnxruntime-node's CPU provider
 * attends in place for a model with sliding-window layers, cached in its own folder
 * (`…-inplace`, manifest `attention`) beside the GroupQueryAttention artifact it shares
 * weights with; other models and other devices keep GQA. Both kinds answer alike.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseShardManifest } from '../../src/core/model/manifest-parse.ts';
import { cpuAttention } from '../../src/core/model/shard-artifact.ts';
import { loadLocalPipeline, type LocalModel } from '../../src/node/local-model.ts';
import { buildGemmaCheckpointFiles } from '../fixtures/gemma-checkpoints.ts';
import { TINY_PRESETS } from '../fixtures/checkpoints.ts';
import { fixtureModel, fixtureModelFromFiles, maxAbsDiff, stepLogits, tempDir } from '../engine/harness.ts';

let root: { dir: string; remove: () => Promise<void> };
let gemma: LocalModel;
let llama: LocalModel;
beforeAll(async () => {
  root = await tempDir('cpu-attention');
  process.env.MESHNET_HOME = path.join(root.dir, 'home');
  gemma = await fixtureModelFromFiles(root.dir, 'gemma3', buildGemmaCheckpointFiles({ version: 3, dtype: 'F32', tied: true, seed: 311, slidingWindow: 4, slidingWindowPattern: 2, numLayers: 2, hiddenSize: 32, intermediateSize: 48, headDim: 16, maxPositionEmbeddings: 256 }));
  llama = await fixtureModel(root.dir, 'llama', { ...TINY_PRESETS.llama, dtype: 'F32', seed: 312, numLayers: 2 });
});
afterAll(() => root.remove());

const mixes = (p: Awaited<ReturnType<typeof loadLocalPipeline>>) => (p.stages[0].executor as unknown as { mixesLengths: boolean }).mixesLengths;
const ids = Array.from({ length: 9 }, (_, i) => (i * 37 + 11) % 120);

describe('default attention per runtime', () => {
  it('CPU: a windowed model attends in place by default, cached apart from GQA, with the same logits', async () => {
    expect(cpuAttention(gemma.checkpoint.config)).toBe('in-place');
    const all = [{ start: 0, end: gemma.checkpoint.config.numLayers }];
    const inPlace = await loadLocalPipeline(gemma, { ranges: all, device: 'cpu', dtype: 'fp32', threads: 1 });
    const gqa = await loadLocalPipeline(gemma, { ranges: all, device: 'cpu', dtype: 'fp32', threads: 1, attention: 'gqa' });
    try {
      expect([mixes(inPlace), mixes(gqa)]).toEqual([true, false]);
      const folder = path.join(process.env.MESHNET_HOME!, 'artifacts', gemma.key);
      const names = (await readdir(folder)).filter((n) => n.startsWith('layers-')).sort();
      expect(names).toEqual(['layers-0-2-fp32-fp32', 'layers-0-2-fp32-fp32-inplace']);
      const manifest = (name: string) => readFile(path.join(folder, name, 'manifest.json'), 'utf8').then((t) => JSON.parse(t) as { attention?: string });
      expect([(await manifest(names[0])).attention, (await manifest(names[1])).attention]).toEqual([undefined, 'in-place']);
      for (let step = 0, position = 0; step < 6; step++) {
        const fed = step === 0 ? ids : [ids[step]];
        const [a, b] = [await stepLogits(inPlace, 's', fed, position), await stepLogits(gqa, 's', fed, position)];
        expect(maxAbsDiff(a, b)).toBeLessThan(1e-4);
        position += fed.length;
      }
    } finally {
      await inPlace.dispose();
      await gqa.dispose();
    }
  });

  it('a model without windows, and a runtime other than the Node CPU provider, keep GQA', async () => {
    expect(cpuAttention(llama.checkpoint.config)).toBe('gqa');
    const p = await loadLocalPipeline(llama, { ranges: [{ start: 0, end: 2 }], device: 'cpu', dtype: 'fp32', threads: 1 });
    const wasm = await loadLocalPipeline(gemma, { ranges: [{ start: 0, end: 2 }], device: 'wasm', dtype: 'fp32', threads: 1 });
    try {
      expect([mixes(p), mixes(wasm)]).toEqual([false, false]);
    } finally {
      await p.dispose();
      await wasm.dispose();
    }
  });

  it('a manifest naming another attention, or in-place attention on the head, is refused', async () => {
    const folder = path.join(process.env.MESHNET_HOME!, 'artifacts', gemma.key);
    const good = JSON.parse(await readFile(path.join(folder, 'layers-0-2-fp32-fp32-inplace', 'manifest.json'), 'utf8')) as Record<string, unknown>;
    expect(parseShardManifest(good, 'm').attention).toBe('in-place');
    expect(() => parseShardManifest({ ...good, attention: 'gqa' }, 'm')).toThrow(/attention gqa is not 'in-place'/);
    expect(() => parseShardManifest({ ...good, part: { kind: 'head' }, window: undefined }, 'm')).toThrow(/attention in-place is not 'in-place' on a layers part/);
  });
});
