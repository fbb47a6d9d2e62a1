/**
 * MoE sparsity check (issue 23, a short form of its benchmark): decode tokens/s of a
 * Qwen3-MoE-shaped random checkpoint against the dense Qwen3 of the same layer bytes (its
 * intermediate size = experts × expert size), one process, same weight format. Usage:
 *   node --import tsx bench/moe-decode.ts [--weights q4] [--layers 4] [--hidden 512] [--experts 32] [--expert-size 256] [--top 4] [--tokens 32]
 * Prints one row per model with the load average; no llama.cpp comparison here.
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { weightSpec, type WeightFormat } from '../src/core/model/quant/weight-format.ts';
import { rangesFromSplit } from '../src/core/mesh/split.ts';
import { TINY_PRESETS } from '../test/fixtures/checkpoints.ts';
import { tinyMoeCheckpoint } from '../test/fixtures/moe-checkpoints.ts';
import { fixtureModel, pipeline, stepLogits, tempDir } from '../test/engine/harness.ts';
import { meshModel } from '../src/node/mesh-model.ts';

const { values } = parseArgs({ options: { weights: { type: 'string', default: 'q4' }, layers: { type: 'string', default: '4' }, hidden: { type: 'string', default: '512' }, experts: { type: 'string', default: '32' }, 'expert-size': { type: 'string', default: '256' }, top: { type: 'string', default: '4' }, tokens: { type: 'string', default: '32' } } });
const [layers, hidden, experts, expertSize, top, tokens] = [values.layers, values.hidden, values.experts, values['expert-size'], values.top, values.tokens].map(Number);
const format = values.weights as WeightFormat;
const spec = weightSpec('fp32', { format, blockSize: 32, accuracyLevel: 4 });
const root = await tempDir('moe-bench');
process.env.MESHNET_HOME = path.join(root.dir, 'home');
const shape = { dtype: 'BF16' as const, seed: 7, numLayers: layers, hiddenSize: hidden, numHeads: 8, numKvHeads: 4, headDim: hidden / 8, vocabSize: 1024 };
const moeOptions = { ...tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'BF16', seed: 7, numExperts: experts, topK: top, expertSize, numLayers: layers, hiddenSize: hidden }), ...shape };
const moe = await fixtureModel(root.dir, 'moe', moeOptions);
const dense = await fixtureModel(root.dir, 'dense', { ...TINY_PRESETS.qwen3, ...shape, intermediateSize: experts * expertSize });
try {
  for (const [name, model] of [['qwen3-moe', moe], ['qwen3 dense, same bytes', dense]] as const) {
    const bytes = meshModel(model, name, 'fp32', spec).bytesPerLayer;
    const p = await pipeline(model, rangesFromSplit(layers, []), 'cpu', 'fp32', spec);
    try {
      await stepLogits(p, 'warm', [1, 2, 3, 4], 0);
      let position = 4;
      const start = performance.now();
      for (let i = 0; i < tokens; i++) await stepLogits(p, 'warm', [5 + (i % 100)], position++);
      const seconds = (performance.now() - start) / 1000;
      console.log(`${name}: ${format}, ${layers} layers × ${(bytes / 2 ** 20).toFixed(1)} MiB, decode ${(tokens / seconds).toFixed(1)} tokens/s (load ${os.loadavg()[0].toFixed(1)})`);
    } finally {
      await p.dispose();
    }
  }
} finally {
  await root.remove();
}
