/**
 * Shard artifacts: the ONNX graph of one part of a model (a layer range, the embedding or
 * the head) in one weight format, plus a manifest saying how its packed weights
 * (`weights.bin`) are made from the checkpoint: which byte ranges are read, and whether they
 * are converted (dtype), quantized (meshnet's block quantizer) or repacked (AWQ/GPTQ). The
 * graph references the packed regions as external data.
 */
import type { ByteSource } from './byte-source.ts';
import { buildEmbeddingGraph, buildHeadGraph } from './head-graphs.ts';
import { serializeModel } from './onnx/onnx-model.ts';
import { weightSpecName, type WeightSpec } from './quant/weight-format.ts';
import { buildShardGraph, type AttentionKind } from './shard-graph.ts';
import type { ActivationDtype } from './activations.ts';
import { windowedLayers, type KvWindow } from './layer-attention.ts';
import type { LayerRange, ModelConfig, TensorLocation } from './types.ts';
import { packWeights } from './weight-packing.ts';
import type { PackedChunk } from './weight-segments.ts';
import { planWeights } from './weight-plan.ts';
import type { WeightSegment } from './weight-segments.ts';

/** Name of the packed weights file shard graphs reference as external data. */
export const WEIGHTS_FILE = 'weights.bin';

export type ShardPart = { readonly kind: 'layers'; readonly range: LayerRange } | { readonly kind: 'embedding' } | { readonly kind: 'head' };

/** Bump when the graph or manifest layout changes, so cached artifacts are rebuilt. */
// 4: weight formats (#12). 5 (issue 17): past_lengths input, capacity-sized past KV, new.{l}.*
// outputs and a batch dimension in shard graphs (KV pool, batched decode). 6 (issue 15): the
// head graph takes logit_positions (logits of several positions, also several sessions' rows).
// 7 (issue 24): shard graphs take seqlens_k, total_sequence_length and position_ids in place
// of past_lengths (computed by the caller: 13 bookkeeping nodes a run fewer). 8 (issue 22):
// sliding-window layers read seqlens_k_window / total_sequence_length_window; manifest `window`.
// 9 (issue 24): a batched stream's q/k/v split names `new.{l}.value` itself (one Identity a
// layer fewer).
export const ARTIFACT_FORMAT = 9;

export interface ShardManifest {
  readonly format: number;
  readonly modelKey: string;
  readonly part: ShardPart;
  /** Activation dtype. */
  readonly dtype: ActivationDtype;
  /** Weight format, block size and accuracy level. */
  readonly weights: WeightSpec;
  readonly weightsLength: number;
  readonly segments: readonly WeightSegment[];
  /**
   * A layers part with sliding-window layers: the window and which of its layers it applies
   * to. Their KV keeps only the window (KvState), fed with `seqlens_k_window` / `total_sequence_length_window`.
   */
  readonly window?: KvWindow;
}

export interface ShardArtifact {
  readonly manifest: ShardManifest;
  readonly graph: Uint8Array; // ONNX ModelProto bytes
}

/**
 * A stable name for a part, activation dtype and weight format, usable as a cache key, file
 * name and URL segment: `layers-0-4-fp32-q4-b32-acc4`, `head-fp16-fp16`.
 */
export function partName(part: ShardPart, dtype: ActivationDtype, weights: WeightSpec): string {
  const base = part.kind === 'layers' ? `layers-${part.range.start}-${part.range.end}` : part.kind;
  return `${base}-${dtype}-${weightSpecName(weights)}`;
}

function planPart(config: ModelConfig, tensors: ReadonlyMap<string, TensorLocation>, part: ShardPart, dtype: ActivationDtype, weights: WeightSpec, attention?: AttentionKind) {
  const plan = planWeights(config, tensors, weights, dtype, WEIGHTS_FILE);
  const graph =
    part.kind === 'layers'
      ? buildShardGraph(config, part.range, dtype, plan.weights, attention)
      : part.kind === 'embedding'
        ? buildEmbeddingGraph(config, dtype, plan.weights)
        : buildHeadGraph(config, dtype, plan.weights);
  return { plan, graph };
}

function windowOf(config: ModelConfig, part: ShardPart): { window?: KvWindow } {
  if (part.kind !== 'layers') return {};
  const window = windowedLayers(config, part.range);
  return window ? { window } : {};
}

/** Bytes of a part's packed weights in a format: what a peer holding it loads (the planner's unit). */
export function partWeightBytes(config: ModelConfig, tensors: ReadonlyMap<string, TensorLocation>, part: ShardPart, dtype: ActivationDtype, weights: WeightSpec): number {
  return planPart(config, tensors, part, dtype, weights).plan.length();
}

/**
 * Build the graph and weight manifest of one part. Pure: reads no weight bytes. `attention`
 * other than the default (GroupQueryAttention) builds a graph that is never cached or served:
 * for tests and benches (see AttentionKind).
 */
export function buildShardArtifact(
  config: ModelConfig,
  tensors: ReadonlyMap<string, TensorLocation>,
  modelKey: string,
  part: ShardPart,
  dtype: ActivationDtype,
  weights: WeightSpec,
  attention?: AttentionKind,
): ShardArtifact {
  const { plan, graph } = planPart(config, tensors, part, dtype, weights, attention);
  return {
    manifest: { format: ARTIFACT_FORMAT, modelKey, part, dtype, weights, weightsLength: plan.length(), segments: plan.segments(), ...windowOf(config, part) },
    graph: serializeModel(graph),
  };
}

/**
 * A part's packed weights in chunks (see weight-packing.ts): only the listed checkpoint byte
 * ranges are read, a few MiB at a time. Each chunk's bytes belong to the caller.
 */
export function shardWeightChunks(manifest: ShardManifest, source: ByteSource): AsyncGenerator<PackedChunk> {
  return packWeights(manifest.segments, source);
}

/** Read a part's weights from the checkpoint into one packed buffer (the `weights.bin` layout). */
export async function loadShardWeights(manifest: ShardManifest, source: ByteSource): Promise<Uint8Array> {
  const out = new Uint8Array(manifest.weightsLength);
  for await (const { offset, bytes } of shardWeightChunks(manifest, source)) {
    if (offset + bytes.byteLength > out.byteLength) throw new RangeError(`packed weights overflow: ${offset + bytes.byteLength} > ${out.byteLength}`);
    out.set(bytes, offset);
  }
  return out;
}
