/**
 * Planning gpt-oss's stacked expert tensors one expert at a time, so a graph node reads one
 * expert's bytes: slice `e` of an `[E, ...]` tensor is a contiguous byte range of it.
 * - biases (`*_bias` [E, n]): float in the activation dtype;
 * - float experts (`gate_up_proj` [E, H, 2I], `down_proj` [E, I, H], [in, out]): in the
 *   weight format's float type (fp32/fp16), for Gemm without transposition; q8/q4 of float
 *   experts is refused (it would need a transposing quantizer: use the MXFP4 checkpoint);
 * - MXFP4 experts: always the exact 8-bit MatMulNBits block of 32 (moe/mxfp4.ts), whatever
 *   the weight format (it is already 4.25 bits a weight; q4 would re-round it).
 */
import type { LinearWeight } from '../onnx/linear-ops.ts';
import { OnnxType, type Initializer } from '../onnx/onnx-model.ts';
import { isQuantized } from '../quant/weight-format.ts';
import type { FloatDtype } from '../types.ts';
import type { WeightPacking } from '../weight-plan.ts';
import type { SourceTensor } from '../weight-segments.ts';

const floatCode = (f: 'fp32' | 'fp16') => (f === 'fp16' ? OnnxType.FLOAT16 : OnnxType.FLOAT);

/** Slice `index` of `source`'s first axis. */
function slice(source: SourceTensor, index: number): SourceTensor {
  const [count, ...rest] = source.shape;
  if (!(index >= 0 && index < count)) throw new RangeError(`tensor '${source.name}' has ${count} entries, not ${index + 1}`);
  const length = source.length / count;
  return { ...source, name: `${source.name}[${index}]`, offset: source.offset + index * length, length, shape: rest };
}

/** Slice `index` of float tensor `name` as a float initializer: `as` 'activation' (biases) or 'weight' (the format's float type). */
export function expertFloat(packing: WeightPacking, name: string, index: number, as: 'activation' | 'weight'): { weight: Initializer; castTo?: number } {
  const src = slice(packing.source(name), index);
  if (src.dtype === 'I32' || src.dtype === 'U8') throw new RangeError(`tensor '${name}' is ${src.dtype}, not a float tensor`);
  let format: 'fp32' | 'fp16' = packing.dtype;
  if (as === 'weight') {
    if (isQuantized(packing.spec.format)) throw new RangeError(`gpt-oss float experts ('${name}') in ${packing.spec.format} are not supported: use fp32/fp16 weights, or the MXFP4 checkpoint`);
    format = packing.spec.format as 'fp32' | 'fp16';
  }
  const elements = src.shape.reduce((a, b) => a * b, 1);
  const out = packing.region(elements * (format === 'fp16' ? 2 : 4));
  packing.add({ kind: 'float', name: src.name, source: { ...src, dtype: src.dtype as FloatDtype }, target: format === 'fp16' ? 'F16' : 'F32', out });
  const weight = packing.external(src.name, floatCode(format), src.shape, out);
  return format === packing.dtype ? { weight } : { weight, castTo: floatCode(packing.dtype) };
}

/** Expert `index` of the MXFP4 pair `${base}_blocks` / `${base}_scales` as an 8-bit MatMulNBits weight [N, K]. */
export function expertMxfp4(packing: WeightPacking, base: string, index: number): LinearWeight {
  const blocks = slice(packing.source(`${base}_blocks`), index); // [N, K/32, 16]
  const scales = slice(packing.source(`${base}_scales`), index); // [N, K/32]
  const [N, kBlocks] = blocks.shape;
  const K = kBlocks * 32;
  const layout = { rows: N, cols: K, bits: 8 as const, blockSize: 32, zeroPoints: false, scaleDtype: packing.dtype, padded: true };
  const out = { data: packing.region(N * K), scales: packing.region(N * kBlocks * (packing.dtype === 'fp16' ? 2 : 4)) };
  const name = `${base}[${index}]`;
  packing.add({ kind: 'mxfp4', name, blocks, scales, layout, out });
  return {
    kind: 'nbits',
    data: packing.external(`${name}.quant`, OnnxType.UINT8, [N, kBlocks, 32], out.data),
    scales: packing.external(`${name}.scales`, floatCode(packing.dtype), [N * kBlocks], out.scales),
    K,
    N,
    bits: 8,
    blockSize: 32,
    accuracyLevel: isQuantized(packing.spec.format) ? packing.spec.accuracyLevel : 0,
  };
}
