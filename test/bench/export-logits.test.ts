/**
 * The bench compares meshnet with transformers.js on "the same weights": this pins that the
 * exporter's complete ONNX model computes what meshnet's shard graphs compute — the same
 * logits for a prefill and a decode step — and that transformers.js `generate()` on the
 * exported folder gives meshnet's greedy tokens.
 */
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportForTransformers } from '../../bench/export-transformers.ts';
import { generateLocal } from '../../src/core/route/local-pipeline.ts';
import { validateSamplingParams } from '../../src/core/sampling/index.ts';
import type { LoadedPipeline, LocalModel } from '../../src/node/local-model.ts';
import { argmax, fixtureModel, maxAbsDiff, pipeline, stepLogits, tempDir } from '../engine/harness.ts';

const LAYERS = 3;
const KV_HEADS = 2;
const HEAD_DIM = 16;

describe('transformers.js export', () => {
  let temp: Awaited<ReturnType<typeof tempDir>>;
  let model: LocalModel;
  let meshnet: LoadedPipeline;
  let exported: ort.InferenceSession;
  let exportDir: string;

  beforeAll(async () => {
    temp = await tempDir('export');
    model = await fixtureModel(temp.dir, 'tiny', { architecture: 'LlamaForCausalLM', dtype: 'F32', tied: true, seed: 7, hiddenSize: 64, numHeads: 4, numKvHeads: KV_HEADS, numLayers: LAYERS, vocabSize: 128 });
    exportDir = path.join(temp.dir, 'export');
    await exportForTransformers(model.directory, exportDir);
    meshnet = await pipeline(model, [{ start: 0, end: 2 }, { start: 2, end: LAYERS }]);
    exported = await ort.InferenceSession.create(path.join(exportDir, 'onnx', 'model.onnx'), { intraOpNumThreads: 1 });
  });

  afterAll(async () => {
    await exported?.release();
    await meshnet?.dispose();
    await temp?.remove();
  });

  it('gives the shard graphs’ logits for a prefill and a decode step', async () => {
    const prompt = [1, 17, 42, 99, 5];
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from(prompt.map(BigInt)), [1, prompt.length]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(prompt.length).fill(1n), [1, prompt.length]),
      position_ids: new ort.Tensor('int64', BigInt64Array.from(prompt.map((_, i) => BigInt(i))), [1, prompt.length]),
    };
    for (let l = 0; l < LAYERS; l++) {
      for (const part of ['key', 'value']) feeds[`past_key_values.${l}.${part}`] = new ort.Tensor('float32', new Float32Array(0), [1, KV_HEADS, 0, HEAD_DIM]);
    }
    const prefill = await exported.run(feeds);
    const vocab = 128;
    const logits = prefill.logits.data as Float32Array; // [1, seq, vocab]
    expect(prefill.logits.dims).toEqual([1, prompt.length, vocab]);
    const lastExported = logits.subarray((prompt.length - 1) * vocab);
    const lastMeshnet = await stepLogits(meshnet, 's', prompt, 0);
    expect(maxAbsDiff(lastExported, lastMeshnet)).toBeLessThan(1e-4);

    const next = argmax(lastMeshnet);
    const step: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from([BigInt(next)]), [1, 1]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(prompt.length + 1).fill(1n), [1, prompt.length + 1]),
      position_ids: new ort.Tensor('int64', BigInt64Array.from([BigInt(prompt.length)]), [1, 1]),
    };
    for (let l = 0; l < LAYERS; l++) {
      for (const part of ['key', 'value']) step[`past_key_values.${l}.${part}`] = prefill[`present.${l}.${part}`];
    }
    const decoded = await exported.run(step);
    expect(maxAbsDiff(decoded.logits.data as Float32Array, await stepLogits(meshnet, 's', [next], prompt.length))).toBeLessThan(1e-4);
  });

  it('transformers.js generate() on the export gives meshnet’s greedy tokens', async () => {
    const { AutoModelForCausalLM, Tensor, env } = await import('@huggingface/transformers');
    env.allowRemoteModels = false;
    env.localModelPath = path.dirname(exportDir);
    const tjs = await AutoModelForCausalLM.from_pretrained(path.basename(exportDir), { local_files_only: true, device: 'cpu', dtype: 'fp32', session_options: { intraOpNumThreads: 1 } });
    try {
      const prompt = [1, 17, 42, 99, 5];
      const input = new Tensor('int64', BigInt64Array.from(prompt.map(BigInt)), [1, prompt.length]);
      const output = (await tjs.generate({ inputs: input, attention_mask: new Tensor('int64', new BigInt64Array(prompt.length).fill(1n), [1, prompt.length]), max_new_tokens: 12, do_sample: false })) as { data: BigInt64Array };
      const theirs = Array.from(output.data, Number).slice(prompt.length);
      const ours: number[] = [];
      for await (const token of generateLocal(meshnet, prompt, validateSamplingParams({ temperature: 0, maxTokens: 12, stopTokenIds: [2] }), crypto.randomUUID())) ours.push(token.tokenId);
      expect(theirs.length).toBeGreaterThan(0);
      expect(theirs).toEqual(ours);
    } finally {
      await tjs.dispose();
    }
  });
});
