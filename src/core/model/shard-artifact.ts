/**
 * Shard artifacts: the ONNX graph of one part of a model (a layer range, the embedding or
 * the head) plus a manifest saying where each weight comes from. Weights stay in place in
 * the checkpoint's .safetensors files; loading reads just those byte ranges (converting the
 * dtype where the checkpoint's differs from the activation dtype) into one packed buffer
 * that the graph references as external data (`weights.bin`).
 */
import type { ByteSource } from './byte-source.ts';
import { fromFloat32, toFloat32 } from './dtype.ts';
import { buildEmbeddingGraph, buildHeadGraph } from './head-graphs.ts';
import { serializeModel } from './onnx/onnx-model.ts';
import { buildShardGraph, onnxType, type ActivationDtype } from './shard-graph.ts';
import type { LayerRange, ModelConfig, TensorDtype, TensorLocation } from './types.ts';

/** Name of the packed weights file shard graphs reference as external data. */
export const WEIGHTS_FILE = 'weights.bin';

export type ShardPart = { readonly kind: 'layers'; readonly range: LayerRange } | { readonly kind: 'embedding' } | { readonly kind: 'head' };

/** Bump when the graph layout changes, so cached artifacts are rebuilt. */
export const ARTIFACT_FORMAT = 18; // 18 (issue 17; renumber at merge, other branches bump too): past_lengths input, capacity past KV, new.{l}.* outputs, batch dimension (KV pool); head graph with a batch dimension

/** One weight: `length` bytes at `offset` in checkpoint `file`, placed at `packedOffset`. */
export interface WeightSegment {
  readonly name: string;
  readonly file: string;
  readonly offset: number;
  readonly length: number;
  readonly sourceDtype: TensorDtype;
  readonly packedOffset: number;
  readonly packedLength: number;
}

export interface ShardManifest {
  readonly format: number;
  readonly modelKey: string;
  readonly part: ShardPart;
  readonly dtype: ActivationDtype;
  readonly weightsLength: number;
  readonly segments: readonly WeightSegment[];
}

export interface ShardArtifact {
  readonly manifest: ShardManifest;
  readonly graph: Uint8Array; // ONNX ModelProto bytes
}

const ALIGN = 64;
const targetDtype = (dtype: ActivationDtype): TensorDtype => (dtype === 'fp16' ? 'F16' : 'F32');

/** A stable name for a part and dtype, e.g. `layers-0-4-fp32`, usable as a cache key or file name. */
export function partName(part: ShardPart, dtype: ActivationDtype): string {
  return part.kind === 'layers' ? `layers-${part.range.start}-${part.range.end}-${dtype}` : `${part.kind}-${dtype}`;
}

/** Build the graph and weight manifest of one part. Pure: reads no weight bytes. */
export function buildShardArtifact(
  config: ModelConfig,
  tensors: ReadonlyMap<string, TensorLocation>,
  modelKey: string,
  part: ShardPart,
  dtype: ActivationDtype,
): ShardArtifact {
  const segments: WeightSegment[] = [];
  let packed = 0;
  const itemSize = dtype === 'fp16' ? 2 : 4;
  const weight = (name: string) => {
    const location = tensors.get(name);
    if (!location) throw new RangeError(`tensor '${name}' is not in the checkpoint`);
    const elements = location.shape.reduce((a, b) => a * b, 1);
    const packedOffset = packed;
    const packedLength = elements * itemSize;
    packed = Math.ceil((packed + packedLength) / ALIGN) * ALIGN;
    segments.push({
      name,
      file: location.file,
      offset: location.offset,
      length: location.length,
      sourceDtype: location.dtype,
      packedOffset,
      packedLength,
    });
    return { name, type: onnxType(dtype), dims: location.shape, external: { location: WEIGHTS_FILE, offset: packedOffset, length: packedLength } };
  };
  const graph =
    part.kind === 'layers'
      ? buildShardGraph(config, part.range, dtype, weight)
      : part.kind === 'embedding'
        ? buildEmbeddingGraph(config, dtype, weight)
        : buildHeadGraph(config, dtype, weight);
  return {
    manifest: { format: ARTIFACT_FORMAT, modelKey, part, dtype, weightsLength: packed, segments },
    graph: serializeModel(graph),
  };
}

/**
 * A part's weights one segment at a time, converted to the activation dtype: only the listed
 * byte ranges are read. Each yielded `bytes` belongs to the caller and is `packedLength` long.
 */
export async function* shardWeightSegments(
  manifest: ShardManifest,
  source: ByteSource,
): AsyncGenerator<{ readonly segment: WeightSegment; readonly bytes: Uint8Array }> {
  const target = targetDtype(manifest.dtype);
  for (const segment of manifest.segments) {
    const bytes = await source.read(segment.file, segment.offset, segment.length);
    const converted = segment.sourceDtype === target ? bytes : fromFloat32(toFloat32(bytes, segment.sourceDtype), target);
    if (converted.byteLength !== segment.packedLength) {
      throw new RangeError(`weight '${segment.name}' has ${converted.byteLength} bytes, the graph expects ${segment.packedLength}`);
    }
    yield { segment, bytes: converted };
  }
}

/** Read a part's weights from the checkpoint into one packed buffer (the `weights.bin` layout). */
export async function loadShardWeights(manifest: ShardManifest, source: ByteSource): Promise<Uint8Array> {
  const out = new Uint8Array(manifest.weightsLength);
  for await (const { segment, bytes } of shardWeightSegments(manifest, source)) out.set(bytes, segment.packedOffset);
  return out;
}
