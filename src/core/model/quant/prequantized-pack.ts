/**
 * Repacking one pre-quantized linear layer (GPTQ or AWQ tensors, layouts in
 * prequantized-plan.ts) into MatMulNBits' layout. The 4-bit values, zeros and scales move
 * as they are: nothing is dequantized. The packed value tensor of one layer is held whole
 * (it is 4-bit: an eighth of the layer's fp32 size).
 */
import type { ByteSource } from '../byte-source.ts';
import { CheckpointError } from '../checkpoint-error.ts';
import { fromFloat32, toFloat32 } from '../dtype.ts';
import type { FloatDtype } from '../types.ts';
import type { PackedChunk, PrequantizedSegment, SourceTensor } from '../weight-segments.ts';
import { rowBytes, setPacked } from './block-quant.ts';

/** AutoAWQ packs output column 8j + t into nibble AWQ_NIBBLE[t] of int32 j. */
const AWQ_NIBBLE = [0, 4, 1, 5, 2, 6, 3, 7];

async function readInt32(reader: ByteSource, t: SourceTensor): Promise<Int32Array> {
  const bytes = await reader.read(t.file, t.offset, t.length);
  if (bytes.byteLength !== t.length) throw new CheckpointError(t.file, `tensor '${t.name}': read ${bytes.byteLength} bytes, expected ${t.length}`);
  return new Int32Array(bytes.slice().buffer); // a copy: aligned, and ours
}

async function readFloat(reader: ByteSource, t: SourceTensor): Promise<Float32Array> {
  return toFloat32(await reader.read(t.file, t.offset, t.length), t.dtype as FloatDtype);
}

const nibble = (word: number, index: number) => (word >>> (4 * index)) & 0x0f;

/**
 * The input-row order MatMulNBits reads (`perm[k']` = checkpoint row) and the group of each
 * MatMulNBits block. Act-order GPTQ: rows sorted by group (stable), each group exactly g
 * rows. Otherwise the groups must already be k // g.
 */
function rowOrder(segment: PrequantizedSegment, groupOf: (k: number) => number): { perm?: Int32Array; blockGroup: (block: number) => number } {
  const K = segment.layout.cols;
  const g = segment.groupSize;
  const bs = segment.layout.blockSize;
  const G = K / g;
  const where = segment.gIdx ?? segment.qweight;
  const fail = (problem: string): never => {
    throw new CheckpointError(where.file, `tensor '${where.name}': ${problem}`);
  };
  if (!segment.out.permutation) {
    for (let k = 0; k < K; k++) if (groupOf(k) !== Math.floor(k / g)) fail(`row ${k} is in group ${groupOf(k)}, not ${Math.floor(k / g)}: g_idx is act-order but quantization_config.desc_act is false`);
    return { blockGroup: (block) => Math.floor((block * bs) / g) };
  }
  const counts = new Int32Array(G);
  for (let k = 0; k < K; k++) {
    const group = groupOf(k);
    if (!(group >= 0 && group < G)) fail(`row ${k} is in group ${group}, outside [0, ${G})`);
    counts[group]++;
  }
  for (let group = 0; group < G; group++) if (counts[group] !== g) fail(`group ${group} holds ${counts[group]} rows, not the group size ${g}`);
  const perm = new Int32Array(K);
  const next = new Int32Array(G).map((_, group) => group * g);
  for (let k = 0; k < K; k++) perm[next[groupOf(k)]++] = k;
  return { perm, blockGroup: (block) => Math.floor((block * bs) / g) };
}

export async function* packPrequantized(segment: PrequantizedSegment, reader: ByteSource): AsyncGenerator<PackedChunk> {
  const { layout, out } = segment;
  const { rows: N, cols: K, blockSize: bs } = layout;
  const qweight = await readInt32(reader, segment.qweight);
  const qzeros = await readInt32(reader, segment.qzeros);
  const scales = await readFloat(reader, segment.scales); // [G, N]
  const gIdx = segment.gIdx ? await readInt32(reader, segment.gIdx) : undefined;
  const gptq = segment.kind === 'gptq';
  const value = gptq ? (k: number, n: number) => nibble(qweight[(k >> 3) * N + n], k & 7) : (k: number, n: number) => nibble(qweight[k * (N / 8) + (n >> 3)], AWQ_NIBBLE[n & 7]);
  const zeroNibble = gptq ? (n: number) => n & 7 : (n: number) => AWQ_NIBBLE[n & 7];
  const g = segment.groupSize;
  const { perm, blockGroup } = rowOrder(segment, gIdx ? (k) => gIdx[k] : (k) => Math.floor(k / g));

  const per = rowBytes(layout);
  const blocks = Math.ceil(K / bs);
  const data = new Uint8Array(N * per.data);
  const zeros = new Uint8Array(N * per.zeroPoints);
  const scaleValues = new Float32Array(N * blocks);
  const rowElements = (per.data * 8) / 4;
  for (let n = 0; n < N; n++) {
    for (let b = 0; b < blocks; b++) {
      const group = blockGroup(b);
      const stored = nibble(qzeros[group * (N / 8) + (n >> 3)], zeroNibble(n)) + segment.zeroOffset;
      if (stored > 15) {
        const t = segment.qzeros;
        throw new CheckpointError(t.file, `tensor '${t.name}': zero point ${stored} of group ${group}, column ${n} does not fit 4 bits (a GPTQ v1 zero of −1)`);
      }
      setPacked(zeros, n * per.zeroPoints * 2 + b, stored, 4);
      scaleValues[n * blocks + b] = scales[group * N + n];
      for (let i = 0; i < bs; i++) {
        const k = b * bs + i;
        setPacked(data, n * rowElements + k, k < K ? value(perm ? perm[k] : k, n) : stored, 4);
      }
    }
  }
  yield { offset: out.data.offset, bytes: data };
  yield { offset: out.scales.offset, bytes: fromFloat32(scaleValues, layout.scaleDtype === 'fp16' ? 'F16' : 'F32') };
  if (out.zeroPoints) yield { offset: out.zeroPoints.offset, bytes: zeros };
  if (perm && out.permutation) {
    const indices = new BigInt64Array(K);
    for (let k = 0; k < K; k++) indices[k] = BigInt(perm[k]);
    yield { offset: out.permutation.offset, bytes: new Uint8Array(indices.buffer) };
  }
}
