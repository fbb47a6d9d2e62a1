/**
 * The recipe for a part's packed weights (`weights.bin`): one segment per checkpoint weight,
 * saying which byte ranges of which checkpoint file it reads, how it is transformed (dtype
 * conversion, block quantization, or repacking of a pre-quantized AWQ/GPTQ tensor) and which
 * regions of the packed buffer it fills. The graph references those regions as external data.
 * Segments are plain JSON: they travel in the manifest to whoever packs the weights.
 */
import type { BlockLayout } from './quant/block-quant.ts';
import type { TensorDtype } from './types.ts';

/** One checkpoint tensor: `length` bytes at absolute `offset` of `file`. */
export interface SourceTensor {
  readonly name: string;
  readonly file: string;
  readonly offset: number;
  readonly length: number;
  readonly dtype: TensorDtype;
  readonly shape: readonly number[];
}

/** Packed bytes as they are produced: `bytes` at `offset` of the packed buffer. */
export interface PackedChunk {
  /** Offset in the packed buffer. */
  readonly offset: number;
  /** Bytes the caller owns. */
  readonly bytes: Uint8Array;
}

/** A byte range of the packed buffer. */
export interface PackedRegion {
  readonly offset: number;
  readonly length: number;
}

/** Where the three MatMulNBits / GatherBlockQuantized tensors of one weight go. */
export interface QuantRegions {
  readonly data: PackedRegion;
  readonly scales: PackedRegion;
  readonly zeroPoints?: PackedRegion;
  /** int64 [K] input-column order (GPTQ act-order only). */
  readonly permutation?: PackedRegion;
}

/** A float tensor converted to `target` (norms, biases, fp32/fp16 weights). */
export interface FloatSegment {
  readonly kind: 'float';
  readonly name: string;
  readonly source: SourceTensor;
  readonly target: 'F32' | 'F16';
  readonly out: PackedRegion;
}

/** A float `[N, K]` matrix block-quantized by meshnet's own quantizer. */
export interface QuantizeSegment {
  readonly kind: 'quantize';
  readonly name: string;
  readonly source: SourceTensor;
  readonly layout: BlockLayout;
  readonly out: QuantRegions;
}

/** A pre-quantized 4-bit linear layer (GPTQ or AWQ tensors) repacked into MatMulNBits' layout. */
export interface PrequantizedSegment {
  readonly kind: 'gptq' | 'awq';
  /** The layer's module name, e.g. `model.layers.0.self_attn.q_proj`. */
  readonly name: string;
  readonly qweight: SourceTensor;
  readonly qzeros: SourceTensor;
  readonly scales: SourceTensor;
  readonly gIdx?: SourceTensor;
  /** GPTQ's v1 format stores zero − 1: add this when unpacking (0 for v2 and AWQ). */
  readonly zeroOffset: 0 | 1;
  /** The checkpoint's group size (the MatMulNBits block size when it can be used as one). */
  readonly groupSize: number;
  readonly layout: BlockLayout;
  readonly out: QuantRegions;
}

/**
 * One expert's MXFP4 `[N, K]` weight (gpt-oss `*_blocks` / `*_scales` slices) rewritten as an
 * exact 8-bit MatMulNBits block of 32 (moe/mxfp4.ts): integers only, no float round trip.
 */
export interface Mxfp4Segment {
  readonly kind: 'mxfp4';
  /** e.g. `model.layers.0.mlp.experts.down_proj[3]`. */
  readonly name: string;
  readonly blocks: SourceTensor; // U8 [N, K/32, 16]
  readonly scales: SourceTensor; // U8 [N, K/32]
  readonly layout: BlockLayout; //  8 bits, block 32, no zero points (128)
  readonly out: QuantRegions;
}

export type WeightSegment = FloatSegment | QuantizeSegment | PrequantizedSegment | Mxfp4Segment;

/** Every packed region a segment writes. */
export function segmentRegions(segment: WeightSegment): PackedRegion[] {
  if (segment.kind === 'float') return [segment.out];
  const { data, scales, zeroPoints, permutation } = segment.out;
  return [data, scales, ...(zeroPoints ? [zeroPoints] : []), ...(permutation ? [permutation] : [])];
}

