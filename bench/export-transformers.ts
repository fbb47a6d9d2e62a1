/**
 * Exporter: one complete ONNX model of a checkpoint in the layout transformers.js loads,
 * built from the same decoder-layer ops as meshnet's shard graphs (appendDecoderLayers).
 *
 * Inputs                                           Outputs
 *   input_ids                 [1, seq] int64         logits              [1, seq, vocab] fp32
 *   attention_mask            [1, total] int64       present.{l}.key     [1, kvH, total, D]
 *   position_ids              [1, seq] int64         present.{l}.value
 *   past_key_values.{l}.key   [1, kvH, past, D]
 *   past_key_values.{l}.value
 * Batch 1 only (the residual stream is 2-D [seq, H], as in shard graphs); the attention
 * mask gives GroupQueryAttention its lengths, so it must be all ones (no padding). Logits
 * cover every position, as Optimum's exports do.
 *
 * The folder: onnx/model.onnx + onnx/model.onnx_data (weights, fp32, packed), and the
 * checkpoint's config.json, generation_config.json and tokenizer files.
 * Usage: node --import tsx bench/export-transformers.ts <checkpoint-dir> <out-dir>
 */
import { copyFile, mkdir, open, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { headTensorNames } from '../src/core/model/architectures.ts';
import { OnnxType, serializeModel, type OnnxGraph } from '../src/core/model/onnx/onnx-model.ts';
import { GraphBuilder } from '../src/core/model/onnx/graph-builder.ts';
import {
  appendDecoderLayers,
  pastKeyName,
  pastValueName,
  presentKeyName,
  presentValueName,
} from '../src/core/model/shard-graph.ts';
import { ARTIFACT_FORMAT, shardWeightChunks, type ShardManifest } from '../src/core/model/shard-artifact.ts';
import type { Checkpoint } from '../src/core/model/checkpoint.ts';
import { weightSpec } from '../src/core/model/quant/weight-format.ts';
import type { ModelConfig, TensorLocation } from '../src/core/model/types.ts';
import { planWeights, type GraphWeights } from '../src/core/model/weight-plan.ts';
import { openLocalModel } from '../src/node/local-model.ts';

export const EXPORT_DATA_FILE = 'model.onnx_data';

/** The complete-model graph over fp32 `weights`. */
export function buildCompleteGraph(config: ModelConfig, weights: GraphWeights): OnnxGraph {
  const g = new GraphBuilder('meshnet_complete');
  const t = OnnxType.FLOAT;
  const { hiddenSize: H, numKvHeads, headDim: D, numLayers, vocabSize, rmsNormEps } = config;
  const names = headTensorNames(config);
  const seen = new Set<string>();
  // Tied models read the embedding twice: one initializer, two uses.
  const use = (name: string) => (seen.has(name) ? name : (seen.add(name), g.initializer(weights.tensor(name))));

  const ids = g.input('input_ids', OnnxType.INT64, [1, 'sequence_length']);
  const mask = g.input('attention_mask', OnnxType.INT64, [1, 'total_sequence_length']);
  const positionIds = g.input('position_ids', OnnxType.INT64, [1, 'sequence_length']);
  for (let l = 0; l < numLayers; l++) {
    g.input(pastKeyName(l), t, [1, numKvHeads, 'past_sequence_length', D]);
    g.input(pastValueName(l), t, [1, numKvHeads, 'past_sequence_length', D]);
  }
  // GroupQueryAttention's lengths from the mask: seqlens_k = sum(mask) - 1, total = mask width.
  const maskSum = g.op1('ReduceSum', [mask, g.int64([1])], { keepdims: 0 }); // [1]
  const seqlensK = g.op1('Cast', [g.op1('Sub', [maskSum, g.int64([1])])], { to: OnnxType.INT32 });
  const totalScalar = g.op1('Cast', [g.op1('Squeeze', [g.op1('Shape', [mask], { start: 1, end: 2 }), g.int64([0])])], { to: OnnxType.INT32 });

  const embedded = g.op1('Gather', [use(names.embedTokens), ids], { axis: 0 }); // [1, seq, H]
  const residual = g.op1('Reshape', [embedded, g.int64([-1, H])]); // [seq, H]
  const out = appendDecoderLayers(g, config, { start: 0, end: numLayers }, 'fp32', weights, {
    residual,
    positionIds,
    seqlensK,
    totalScalar,
  });
  const normed = g.op1('SimplifiedLayerNormalization', [out, use(names.finalNorm)], { axis: -1, epsilon: rmsNormEps, stash_type: 1 });
  const logits = g.op1('Gemm', [normed, use(names.lmHead)], { transB: 1 }); // [seq, vocab]
  g.op1('Reshape', [logits, g.int64([1, -1, vocabSize])], {}, { output: 'logits' });
  g.output('logits', t, [1, 'sequence_length', vocabSize]);
  for (let l = 0; l < numLayers; l++) {
    g.output(presentKeyName(l), t, [1, numKvHeads, 'total_sequence_length', D]);
    g.output(presentValueName(l), t, [1, numKvHeads, 'total_sequence_length', D]);
  }
  return g.build();
}

/** Graph plus the packed weight layout of `model.onnx_data` (pure; reads no weights). */
export function planExport(config: ModelConfig, tensors: ReadonlyMap<string, TensorLocation>): { graph: OnnxGraph; manifest: ShardManifest } {
  const weights = weightSpec('fp32');
  const plan = planWeights(config, tensors, weights, 'fp32', EXPORT_DATA_FILE);
  const graph = buildCompleteGraph(config, plan.weights);
  const manifest: ShardManifest = {
    format: ARTIFACT_FORMAT,
    modelKey: 'export',
    part: { kind: 'layers', range: { start: 0, end: config.numLayers } },
    dtype: 'fp32',
    weights,
    weightsLength: plan.length(),
    segments: plan.segments(),
  };
  return { graph, manifest };
}

const COPIED = /^(config\.json|generation_config\.json|tokenizer\.json|tokenizer_config\.json|special_tokens_map\.json|tokenizer\.model)$/;

/** Write the transformers.js folder for `checkpoint` (a folder on disk) to `outDir`. */
export async function exportForTransformers(checkpointDir: string, outDir: string, checkpoint?: Checkpoint): Promise<void> {
  const cp = checkpoint ?? (await openLocalModel(checkpointDir)).checkpoint;
  const { graph, manifest } = planExport(cp.config, cp.tensors);
  await mkdir(path.join(outDir, 'onnx'), { recursive: true });
  await writeFile(path.join(outDir, 'onnx', 'model.onnx'), serializeModel(graph));
  const data = await open(path.join(outDir, 'onnx', EXPORT_DATA_FILE), 'w');
  try {
    for await (const { offset, bytes } of shardWeightChunks(manifest, cp.source)) await data.write(bytes, 0, bytes.byteLength, offset);
    await data.truncate(manifest.weightsLength);
  } finally {
    await data.close();
  }
  for (const name of await readdir(checkpointDir)) {
    if (!COPIED.test(name)) continue;
    if (name === 'config.json') {
      // Tell transformers.js the weights are external (onnx/model.onnx_data) and fp32.
      const config = JSON.parse(await readFile(path.join(checkpointDir, name), 'utf8'));
      config['transformers.js_config'] = { use_external_data_format: true, dtype: 'fp32' };
      await writeFile(path.join(outDir, name), `${JSON.stringify(config, null, 2)}\n`);
    } else {
      await copyFile(path.join(checkpointDir, name), path.join(outDir, name));
    }
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [from, to] = process.argv.slice(2);
  if (!from || !to) {
    process.stderr.write('usage: node --import tsx bench/export-transformers.ts <checkpoint-dir> <out-dir>\n');
    process.exit(2);
  }
  await exportForTransformers(from, to);
  process.stderr.write(`exported ${from} to ${to}\n`);
}
