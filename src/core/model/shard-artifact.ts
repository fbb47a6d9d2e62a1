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
import { allInPlace, buildShardGraph, type AttentionKind } from './shard-graph.ts';
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
// layer fewer). 10 (issue 22): manifest `attention: 'in-place'` on layer graphs attending from
// plain ops (the default of onnxruntime-node CPU peers for sliding-window models), cached beside the GQA ones.
export const ARTIFACT_FORMAT = 10;

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
  /** Present on a layers part whose graph attends in place (model/in-place-attention.ts); absent: GroupQueryAttention. */
  readonly attention?: 'in-place';
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

/** The attention a part's graph is built with: in place only for a layers part whose every layer allows it. */
export function effectiveAttention(config: ModelConfig, part: ShardPart, dtype: ActivationDtype, attention: AttentionKind = 'gqa'): AttentionKind {
  return attention === 'in-place' && part.kind === 'layers' && allInPlace(config, part.range, dtype) ? 'in-place' : 'gqa';
}

/**
 * The attention onnxruntime-node's CPU provider runs best for a model (bench/window-decode.ts,
 * issue 22's note): in place for models with sliding-window layers, where GroupQueryAttention's
 * copy of every windowed layer's past each step costs most (Gemma-3-1B shape, q4, decode at
 * 4,096 against 32 positions: 0.67 with GQA, 0.92 in place; at 32 in place costs ~4 % more CPU).
 * Elsewhere GQA (issue 24 measured no gain at 2,048 positions on a Llama shape). WebGPU and wasm
 * keep GQA (GPU-buffer KV; wasm not measured).
 */
export function cpuAttention(config: ModelConfig): AttentionKind {
  return windowedLayers(config, { start: 0, end: config.numLayers }) ? 'in-place' : 'gqa';
}

/** Bytes of a part's packed weights in a format: what a peer holding it loads (the planner's unit). */
export function partWeightBytes(config: ModelConfig, tensors: ReadonlyMap<string, TensorLocation>, part: ShardPart, dtype: ActivationDtype, weights: WeightSpec): number {
  return planPart(config, tensors, part, dtype, weights).plan.length();
}

/**
 * Build the graph and weight manifest of one part. Pure: reads no weight bytes. `attention`
 * 'in-place' builds a layers graph attending in place where every layer allows it (manifest
 * `attention`); it is cached in its own folder (artifact-cache.ts) and not served to peers.
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
  const kind = effectiveAttention(config, part, dtype, attention);
  const { plan, graph } = planPart(config, tensors, part, dtype, weights, kind);
  return {
    manifest: { format: ARTIFACT_FORMAT, modelKey, part, dtype, weights, weightsLength: plan.length(), segments: plan.segments(), ...windowOf(config, part), ...(kind === 'in-place' && { attention: kind }) },
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
