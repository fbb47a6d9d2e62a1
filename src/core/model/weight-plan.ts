/**
 * Planning a part's weights: each Hugging Face tensor the graph asks for becomes one or more
 * initializers pointing into the packed buffer (`weights.bin`), and one segment saying how to
 * fill those bytes from the checkpoint. The graph builders ask through `GraphWeights`, so
 * the same graph code serves every weight format. Pure: reads no weight bytes.
 */
import { ONNX_EXTERNAL_ALIGN } from './onnx/onnx-model.ts';
import { OnnxType, type Initializer, type OnnxTypeCode } from './onnx/onnx-model.ts';
import type { EmbeddingWeight, LinearWeight } from './onnx/linear-ops.ts';
import { quantizedBytes, type BlockLayout } from './quant/block-quant.ts';
import { planPrequantizedLinear, prequantizedBase } from './quant/prequantized-plan.ts';
import { isQuantized, quantBits, usesZeroPoints, type WeightSpec } from './quant/weight-format.ts';
import type { ActivationDtype } from './activations.ts';
import type { ModelConfig, TensorLocation } from './types.ts';
import type { PackedRegion, QuantRegions, SourceTensor, WeightSegment } from './weight-segments.ts';

/** What graph builders ask for, by Hugging Face tensor name. */
export interface GraphWeights {
  /** A float tensor in the activation dtype (norms, biases). */
  tensor(name: string): Initializer;
  /** A linear layer's `[out, in]` weight, stored as the weight format says. */
  linear(name: string): LinearWeight;
  /** The `[vocab, hidden]` embedding table, stored as the weight format says. */
  embedding(name: string): EmbeddingWeight;
  /**
   * Several linear layers over the same input as one MatMulNBits (their rows stacked: q/k/v,
   * gate/up), with their biases stacked likewise; `sizes` are each one's output width, in
   * order. Undefined when they cannot share one op (float formats, or a pre-quantized member).
   */
  linearGroup(names: readonly string[], biases?: readonly (string | undefined)[]): { weight: LinearWeight; bias?: Initializer; sizes: number[] } | undefined;
  /**
   * Every linear layer runs as MatMulNBits (q8/q4, AWQ/GPTQ; a module such a checkpoint left
   * in float is quantized by meshnet's own q4), which takes activations of any rank.
   */
  readonly batchedLinears: boolean;
  /** The plan's own tools, for architectures whose tensors need their own layout (moe/gpt-oss-weights.ts). */
  readonly packing: WeightPacking;
}

/** Low-level planning: reserve packed bytes, record how they are filled, name them as an initializer. */
export interface WeightPacking {
  readonly spec: WeightSpec;
  readonly dtype: ActivationDtype;
  /** The checkpoint tensor `name` (any dtype). */
  source(name: string): SourceTensor;
  /** `length` bytes of the packed buffer (64-byte aligned start). */
  region(length: number): PackedRegion;
  add(segment: WeightSegment): void;
  external(name: string, type: OnnxTypeCode, dims: readonly number[], region: PackedRegion): Initializer;
}

export interface WeightPlan {
  readonly weights: GraphWeights;
  /** Segments planned so far, in packing order. */
  segments(): WeightSegment[];
  /** Bytes of the packed buffer so far (each region aligned to 64 bytes). */
  length(): number;
}

const floatType = (dtype: ActivationDtype | 'fp32' | 'fp16'): OnnxTypeCode => (dtype === 'fp16' ? OnnxType.FLOAT16 : OnnxType.FLOAT);
const target = (dtype: 'fp32' | 'fp16') => (dtype === 'fp16' ? ('F16' as const) : ('F32' as const));

/**
 * A plan over `tensors` for weights in `spec`, activations in `dtype`; initializers reference
 * the packed buffer as external data file `location`.
 */
export function planWeights(config: ModelConfig, tensors: ReadonlyMap<string, TensorLocation>, spec: WeightSpec, dtype: ActivationDtype, location: string): WeightPlan {
  const segments: WeightSegment[] = [];
  let packed = 0;
  const region = (length: number): PackedRegion => {
    const r = { offset: packed, length };
    packed = Math.ceil((packed + length) / ONNX_EXTERNAL_ALIGN) * ONNX_EXTERNAL_ALIGN;
    return r;
  };
  const external = (name: string, type: OnnxTypeCode, dims: readonly number[], r: PackedRegion): Initializer => ({
    name,
    type,
    dims,
    external: { location, offset: r.offset, length: r.length },
  });
  const source = (name: string): SourceTensor => {
    const t = tensors.get(name);
    if (!t) throw new RangeError(`tensor '${name}' is not in the checkpoint`);
    if (t.dtype === 'I32' || t.dtype === 'U8') throw new RangeError(`tensor '${name}' in ${t.file} is ${t.dtype}, not a float tensor`);
    return { name, file: t.file, offset: t.offset, length: t.length, dtype: t.dtype, shape: t.shape };
  };
  const floatTensor = (name: string, as: 'fp32' | 'fp16'): Initializer => {
    const src = source(name);
    const elements = src.shape.reduce((a, b) => a * b, 1);
    const out = region(elements * (as === 'fp16' ? 2 : 4));
    segments.push({ kind: 'float', name, source: src, target: target(as), out });
    return external(name, floatType(as), src.shape, out);
  };
  /** Block-quantized tensors of `name` ([N, K]) with the spec's bits and block size. */
  const quantized = (name: string, padded: boolean): { layout: BlockLayout; out: QuantRegions; src: SourceTensor } => {
    const src = source(name);
    if (src.shape.length !== 2) throw new RangeError(`tensor '${name}' has shape [${src.shape.join(', ')}], not a matrix`);
    const format = spec.format as 'q8' | 'q4';
    const layout: BlockLayout = { rows: src.shape[0], cols: src.shape[1], bits: quantBits(format), blockSize: spec.blockSize, zeroPoints: usesZeroPoints(format), scaleDtype: dtype, padded };
    const bytes = quantizedBytes(layout);
    const out: QuantRegions = {
      data: region(bytes.data),
      scales: region(bytes.scales),
      ...(layout.zeroPoints ? { zeroPoints: region(bytes.zeroPoints) } : {}),
    };
    segments.push({ kind: 'quantize', name, source: src, layout, out });
    return { layout, out, src };
  };
  /** Sub-ranges of one region, one per part, in order (no alignment gaps between them). */
  const split = (whole: PackedRegion, lengths: readonly number[]): PackedRegion[] => {
    let at = whole.offset;
    return lengths.map((length) => ((at += length), { offset: at - length, length }));
  };
  const quantInitializers = (name: string, layout: BlockLayout, out: QuantRegions) => {
    const blocks = Math.ceil(layout.cols / layout.blockSize);
    return {
      data: external(`${name}.quant`, OnnxType.UINT8, layout.padded ? [layout.rows, blocks, (layout.blockSize * layout.bits) / 8] : [layout.rows, out.data.length / layout.rows], out.data),
      scales: external(`${name}.scales`, floatType(dtype), layout.padded ? [layout.rows * blocks] : [layout.rows, blocks], out.scales),
      ...(out.zeroPoints
        ? { zeroPoints: external(`${name}.zero_points`, OnnxType.UINT8, layout.padded ? [out.zeroPoints.length] : [layout.rows, out.zeroPoints.length / layout.rows], out.zeroPoints) }
        : {}),
    };
  };

  const rawSource = (name: string): SourceTensor => {
    const t = tensors.get(name);
    if (!t) throw new RangeError(`tensor '${name}' is not in the checkpoint`);
    return { name, file: t.file, offset: t.offset, length: t.length, dtype: t.dtype, shape: t.shape };
  };
  const weights: GraphWeights = {
    packing: { spec, dtype, source: rawSource, region, add: (segment) => segments.push(segment), external },
    batchedLinears: isQuantized(spec.format),
    tensor: (name) => floatTensor(name, dtype),
    linear(name): LinearWeight {
      const base = prequantizedBase(config, tensors, name);
      if (base !== undefined) {
        const planned = planPrequantizedLinear(config, tensors, base, spec, dtype, region);
        segments.push(planned.segment);
        const { layout, out } = planned.segment;
        return {
          kind: 'nbits',
          ...quantInitializers(base, layout, out),
          ...(out.permutation ? { permutation: external(`${base}.permutation`, OnnxType.INT64, [layout.cols], out.permutation) } : {}),
          K: layout.cols,
          N: layout.rows,
          bits: layout.bits,
          blockSize: layout.blockSize,
          accuracyLevel: spec.accuracyLevel,
        };
      }
      if (!isQuantized(spec.format)) {
        const weight = floatTensor(name, spec.format);
        return spec.format === dtype ? { kind: 'float', weight } : { kind: 'float', weight, castTo: floatType(dtype) };
      }
      const { layout, out } = quantized(name, true);
      return { kind: 'nbits', ...quantInitializers(name, layout, out), K: layout.cols, N: layout.rows, bits: layout.bits, blockSize: layout.blockSize, accuracyLevel: spec.accuracyLevel };
    },
    linearGroup(names, biases) {
      if (!isQuantized(spec.format) || names.some((n) => prequantizedBase(config, tensors, n) !== undefined)) return undefined;
      if (biases && biases.some((b) => b !== undefined) && biases.some((b) => b === undefined)) return undefined;
      const sources = names.map(source);
      const K = sources[0].shape[1];
      if (sources.some((s) => s.shape.length !== 2 || s.shape[1] !== K)) return undefined;
      const format = spec.format as 'q8' | 'q4';
      const layoutOf = (rows: number): BlockLayout => ({ rows, cols: K, bits: quantBits(format), blockSize: spec.blockSize, zeroPoints: usesZeroPoints(format), scaleDtype: dtype, padded: true });
      const sizes = sources.map((s) => s.shape[0]);
      const parts = sizes.map((rows) => quantizedBytes(layoutOf(rows)));
      const layout = layoutOf(sizes.reduce((a, b) => a + b, 0));
      const total = quantizedBytes(layout);
      const whole: QuantRegions = { data: region(total.data), scales: region(total.scales), ...(layout.zeroPoints ? { zeroPoints: region(total.zeroPoints) } : {}) };
      const data = split(whole.data, parts.map((p) => p.data));
      const scales = split(whole.scales, parts.map((p) => p.scales));
      const zeroPoints = whole.zeroPoints ? split(whole.zeroPoints, parts.map((p) => p.zeroPoints)) : undefined;
      sources.forEach((src, i) =>
        segments.push({ kind: 'quantize', name: src.name, source: src, layout: layoutOf(sizes[i]), out: { data: data[i], scales: scales[i], ...(zeroPoints ? { zeroPoints: zeroPoints[i] } : {}) } }),
      );
      const fused = `${names[0]}+${names.length - 1}`;
      let bias: Initializer | undefined;
      if (biases && biases.every((b) => b !== undefined)) {
        const item = dtype === 'fp16' ? 2 : 4;
        const wholeBias = region(layout.rows * item);
        split(wholeBias, sizes.map((n) => n * item)).forEach((out, i) => segments.push({ kind: 'float', name: biases[i]!, source: source(biases[i]!), target: target(dtype), out }));
        bias = external(`${fused}.bias`, floatType(dtype), [layout.rows], wholeBias);
      }
      const weight: LinearWeight = { kind: 'nbits', ...quantInitializers(fused, layout, whole), K, N: layout.rows, bits: layout.bits, blockSize: layout.blockSize, accuracyLevel: spec.accuracyLevel };
      return { weight, ...(bias ? { bias } : {}), sizes };
    },
    embedding(name): EmbeddingWeight {
      if (!isQuantized(spec.format)) {
        const weight = floatTensor(name, spec.format);
        return spec.format === dtype ? { kind: 'float', weight } : { kind: 'float', weight, castTo: floatType(dtype) };
      }
      const { layout, out } = quantized(name, false);
      return { kind: 'block', ...quantInitializers(name, layout, out), bits: layout.bits, blockSize: layout.blockSize };
    },
  };
  return { weights, segments: () => [...segments], length: () => packed };
}
