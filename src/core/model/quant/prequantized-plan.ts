/**
 * Pre-quantized linear layers (AWQ / GPTQ checkpoints as the Hub has them) mapped onto
 * MatMulNBits, and the checks that refuse tensors that do not fit.
 *
 * Tensors per linear module `m` (4-bit, group size g, K = in, N = out, G = K / g groups):
 *
 *   GPTQ   m.qweight int32 [K/8, N]   8 values along K per int32, value j in bits 4j..4j+3
 *          m.qzeros  int32 [G, N/8]   8 zeros along N per int32, same bit order (v1: zero − 1)
 *          m.scales  float [G, N]
 *          m.g_idx   int32 [K]        group of each input row (act-order: any permutation of
 *                                     k // g; without act-order: exactly k // g)
 *   AWQ    m.qweight int32 [K, N/8]   8 values along N per int32, nibble i holds column
 *          m.qzeros  int32 [G, N/8]     8j + [0, 2, 4, 6, 1, 3, 5, 7][i] (AutoAWQ's order)
 *          m.scales  float [G, N]
 *
 *   W[n, k] = (q[k, n] − zero[group(k), n]) · scale[group(k), n]
 *
 * MatMulNBits takes the values as they are (no float round trip): its block size is g when g
 * is a valid block size (a power of two, 16…256), else the largest valid block size dividing g
 * (scales and zeros repeated), else (g = −1) `--quant-block`. GPTQ act-order becomes a column
 * permutation of the input (a Gather before the op) so that each block is one group; every
 * group must then hold exactly g rows.
 */
import { CheckpointError } from '../checkpoint-error.ts';
import type { ActivationDtype } from '../activations.ts';
import type { ModelConfig, TensorLocation } from '../types.ts';
import type { PackedRegion, PrequantizedSegment, SourceTensor } from '../weight-segments.ts';
import { isValidBlockSize, quantizedBytes, type BlockLayout } from './block-quant.ts';
import type { WeightSpec } from './weight-format.ts';

const MAX_BLOCK = 256;

/** The module name (`…q_proj`) when `weightName` (`…q_proj.weight`) is stored pre-quantized, else undefined. */
export function prequantizedBase(config: ModelConfig, tensors: ReadonlyMap<string, TensorLocation>, weightName: string): string | undefined {
  if (!config.quantization || !weightName.endsWith('.weight')) return undefined;
  const base = weightName.slice(0, -'.weight'.length);
  return tensors.has(`${base}.qweight`) ? base : undefined;
}

/** The MatMulNBits block size for group size `g` over `K` inputs (see the file comment), or undefined. */
export function prequantizedBlockSize(groupSize: number, K: number, fallback: number): number | undefined {
  const g = groupSize === -1 ? K : groupSize;
  if (isValidBlockSize(g) && g <= MAX_BLOCK) return g;
  if (groupSize === -1) return fallback;
  for (let b = MAX_BLOCK; b >= 16; b /= 2) if (g % b === 0) return b;
  return undefined;
}

/** Rows per group of `base` (g, or K for −1). */
const groupRows = (groupSize: number, K: number) => (groupSize === -1 ? K : groupSize);

/**
 * Checks the pre-quantized tensors of linear `base` (expected `[N, K]`): present, I32/float
 * as required, shapes that agree with each other and with the config, a group size that
 * divides K. Throws CheckpointError naming the tensor and its file.
 */
export function checkPrequantizedLinear(config: ModelConfig, tensors: ReadonlyMap<string, TensorLocation>, base: string, expected: readonly number[], weightsFile: string): void {
  const q = config.quantization!;
  const [N, K] = expected;
  const qweight = tensors.get(`${base}.qweight`)!;
  const need = (suffix: string): TensorLocation => {
    const t = tensors.get(`${base}.${suffix}`);
    if (!t) throw new CheckpointError(weightsFile, `tensor '${base}.${suffix}' is missing (a ${q.method} layer needs qweight, qzeros and scales${q.method === 'gptq' && q.descAct ? ' and g_idx' : ''})`);
    return t;
  };
  const fail = (t: TensorLocation, problem: string): never => {
    throw new CheckpointError(t.file, `tensor '${t.name}': ${problem}`);
  };
  const shape = (t: TensorLocation, dims: number[], what: string) => {
    if (t.shape.length !== dims.length || t.shape.some((d, i) => d !== dims[i])) fail(t, `has shape [${t.shape.join(', ')}], expected [${dims.join(', ')}] (${what})`);
  };
  const int32 = (t: TensorLocation) => {
    if (t.dtype !== 'I32') fail(t, `is ${t.dtype}, expected I32 (packed 4-bit values)`);
  };
  const qzeros = need('qzeros');
  const scales = need('scales');
  const gIdx = tensors.get(`${base}.g_idx`);
  if (q.method === 'gptq' && q.descAct && !gIdx) need('g_idx');
  if (N % 8 !== 0) fail(qweight, `output dimension ${N} is not a multiple of 8, so it cannot hold packed 4-bit zeros`);
  const g = groupRows(q.groupSize, K);
  if (K % g !== 0) fail(qweight, `group size ${q.groupSize} does not divide the input dimension ${K} (supported: a group size that divides it, or -1)`);
  if (prequantizedBlockSize(q.groupSize, K, 32) === undefined) fail(qweight, `group size ${q.groupSize} is not a multiple of 16 (supported: multiples of 16, or -1)`);
  const G = K / g;
  for (const t of [qweight, qzeros]) int32(t);
  if (scales.dtype === 'I32') fail(scales, 'is I32, expected a float tensor');
  if (q.method === 'gptq') {
    if (K % 8 !== 0) fail(qweight, `input dimension ${K} is not a multiple of 8`);
    shape(qweight, [K / 8, N], 'GPTQ packs 8 input rows per int32');
  } else {
    shape(qweight, [K, N / 8], 'AWQ packs 8 output columns per int32');
  }
  shape(qzeros, [G, N / 8], `${G} groups × output columns / 8`);
  shape(scales, [G, N], `${G} groups × output columns`);
  if (gIdx) {
    int32(gIdx);
    shape(gIdx, [K], 'one group index per input row');
  }
}

const sourceOf = (t: TensorLocation): SourceTensor => ({ name: t.name, file: t.file, offset: t.offset, length: t.length, dtype: t.dtype, shape: t.shape });

/** The segment (regions allocated with `region`) that repacks linear `base` for MatMulNBits. */
export function planPrequantizedLinear(
  config: ModelConfig,
  tensors: ReadonlyMap<string, TensorLocation>,
  base: string,
  spec: WeightSpec,
  dtype: ActivationDtype,
  region: (length: number) => PackedRegion,
): { segment: PrequantizedSegment } {
  const q = config.quantization!;
  const qweight = tensors.get(`${base}.qweight`)!;
  const N = q.method === 'gptq' ? qweight.shape[1] : qweight.shape[1] * 8;
  const K = q.method === 'gptq' ? qweight.shape[0] * 8 : qweight.shape[0];
  const blockSize = prequantizedBlockSize(q.groupSize, K, spec.blockSize ?? 32);
  if (blockSize === undefined) throw new CheckpointError(qweight.file, `tensor '${qweight.name}': group size ${q.groupSize} cannot map onto a MatMulNBits block`);
  const layout: BlockLayout = { rows: N, cols: K, bits: 4, blockSize, zeroPoints: true, scaleDtype: dtype, padded: true };
  const bytes = quantizedBytes(layout);
  const gIdx = tensors.get(`${base}.g_idx`);
  const permuted = q.method === 'gptq' && q.descAct;
  const out = {
    data: region(bytes.data),
    scales: region(bytes.scales),
    zeroPoints: region(bytes.zeroPoints),
    ...(permuted ? { permutation: region(K * 8) } : {}),
  };
  const segment: PrequantizedSegment = {
    kind: q.method,
    name: base,
    qweight: sourceOf(qweight),
    qzeros: sourceOf(tensors.get(`${base}.qzeros`)!),
    scales: sourceOf(tensors.get(`${base}.scales`)!),
    ...(gIdx && q.method === 'gptq' ? { gIdx: sourceOf(gIdx) } : {}),
    zeroOffset: q.zeroOffset,
    groupSize: groupRows(q.groupSize, K),
    layout,
    out,
  };
  return { segment };
}
