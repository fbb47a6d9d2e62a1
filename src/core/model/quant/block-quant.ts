/**
 * Block-wise weight quantization in onnxruntime's `MatMulNBits` layout (com.microsoft), and
 * its inverse. A linear weight W is Hugging Face's `[N = out, K = in]`, row-major. Each row is
 * cut along K into `kBlocks = ceil(K / blockSize)` blocks; the last block is padded (the pad
 * holds the zero point, so it dequantizes to 0 and never reaches the output: the op reads only
 * K inputs). Per block: `w ≈ (q − zeroPoint) · scale`.
 *
 *   data         uint8 [N, kBlocks, blockSize · bits / 8]   4-bit: element 2j in the low nibble
 *                                                           of byte j, 2j+1 in the high nibble
 *   scales       [N, kBlocks]                               the activation dtype (fp32 or fp16)
 *   zero points  uint8 [N, ceil(kBlocks · bits / 8)]        4-bit: block 2j low nibble, 2j+1 high;
 *                                                           absent = 2^(bits−1) (symmetric)
 *
 * GatherBlockQuantized (embeddings) wants rows of exactly K values, `[vocab, H · bits / 8]`
 * (`padded: false`); when K is a multiple of the block size both layouts are the same bytes.
 *
 * Quantization works row by row, so callers stream a tensor in chunks of rows: the chunk's
 * outputs are contiguous slices of each output tensor.
 */
import { f16BitsToF32, f32ToF16Bits } from '../dtype.ts';

export type QuantBits = 4 | 8;
/** How scales are stored: the activation dtype, as MatMulNBits requires. */
export type ScaleDtype = 'fp32' | 'fp16';

/** The shape facts of one block-quantized matrix. */
export interface BlockLayout {
  readonly rows: number; // N
  readonly cols: number; // K
  readonly bits: QuantBits;
  readonly blockSize: number;
  /** With zero points (asymmetric, min/max) or without (symmetric around 2^(bits−1)). */
  readonly zeroPoints: boolean;
  readonly scaleDtype: ScaleDtype;
  /** Rows padded to whole blocks (MatMulNBits) or exactly K values long (GatherBlockQuantized). */
  readonly padded: boolean;
}

/** One quantized matrix (or a chunk of its rows): the three MatMulNBits tensors as bytes. */
export interface BlockQuantized {
  readonly data: Uint8Array;
  readonly scales: Uint8Array; // little-endian fp32 or fp16
  readonly zeroPoints?: Uint8Array;
}

export const blocksPerRow = (layout: Pick<BlockLayout, 'cols' | 'blockSize'>) => Math.ceil(layout.cols / layout.blockSize);
/** Bytes of one block's packed values. */
export const blobBytes = (layout: Pick<BlockLayout, 'bits' | 'blockSize'>) => (layout.blockSize * layout.bits) / 8;
/** Bytes per row of each output tensor. */
export function rowBytes(layout: BlockLayout): { data: number; scales: number; zeroPoints: number } {
  const blocks = blocksPerRow(layout);
  if (!layout.padded && (layout.cols * layout.bits) % 8 !== 0) throw new RangeError(`an unpadded ${layout.bits}-bit row of ${layout.cols} values is not whole bytes`);
  return {
    data: layout.padded ? blocks * blobBytes(layout) : (layout.cols * layout.bits) / 8,
    scales: blocks * (layout.scaleDtype === 'fp16' ? 2 : 4),
    zeroPoints: layout.zeroPoints ? Math.ceil((blocks * layout.bits) / 8) : 0,
  };
}

/** Total bytes of the three tensors of `layout`. */
export function quantizedBytes(layout: BlockLayout): { data: number; scales: number; zeroPoints: number } {
  const row = rowBytes(layout);
  return { data: row.data * layout.rows, scales: row.scales * layout.rows, zeroPoints: row.zeroPoints * layout.rows };
}

/** The block sizes MatMulNBits and GatherBlockQuantized accept: powers of two ≥ 16. */
export function isValidBlockSize(blockSize: number): boolean {
  return Number.isInteger(blockSize) && blockSize >= 16 && (blockSize & (blockSize - 1)) === 0;
}

/** A scale as the graph will hold it (fp16 rounds). */
function storedScale(value: number, dtype: ScaleDtype): number {
  return dtype === 'fp16' ? f16BitsToF32(f32ToF16Bits(value)) : Math.fround(value);
}

function writeScale(view: DataView, index: number, value: number, dtype: ScaleDtype): void {
  if (dtype === 'fp16') view.setUint16(index * 2, f32ToF16Bits(value), true);
  else view.setFloat32(index * 4, value, true);
}

function readScale(view: DataView, index: number, dtype: ScaleDtype): number {
  return dtype === 'fp16' ? f16BitsToF32(view.getUint16(index * 2, true)) : view.getFloat32(index * 4, true);
}

/** Writes a `bits`-wide value at element `index` of a packed byte array. */
export function setPacked(bytes: Uint8Array, index: number, value: number, bits: QuantBits): void {
  if (bits === 8) {
    bytes[index] = value;
    return;
  }
  const byte = index >> 1;
  bytes[byte] = index & 1 ? (bytes[byte] & 0x0f) | (value << 4) : (bytes[byte] & 0xf0) | value;
}

export function getPacked(bytes: Uint8Array, index: number, bits: QuantBits): number {
  if (bits === 8) return bytes[index];
  const byte = bytes[index >> 1];
  return index & 1 ? byte >> 4 : byte & 0x0f;
}

/**
 * Quantize rows `[rows, K]` of W (row-major float32) to the layout's tensors.
 * Asymmetric (zero points): the block's range is widened to include 0 (so 0 stays exact),
 * scale = range / (2^bits − 1), zero point = round(−min / scale). Symmetric: scale =
 * max|w| / (2^(bits−1) − 1), zero point 2^(bits−1) implied. Scales are rounded to their
 * stored dtype before the values are quantized against them.
 */
export function quantizeRows(values: Float32Array, layout: BlockLayout): BlockQuantized {
  const { cols: K, bits, blockSize } = layout;
  if (values.length % K !== 0) throw new RangeError(`quantizeRows: ${values.length} values are not whole rows of ${K}`);
  const rows = values.length / K;
  const blocks = blocksPerRow(layout);
  const perRow = rowBytes(layout);
  const data = new Uint8Array(rows * perRow.data);
  const scales = new Uint8Array(rows * perRow.scales);
  const zeroPoints = layout.zeroPoints ? new Uint8Array(rows * perRow.zeroPoints) : undefined;
  const scaleView = new DataView(scales.buffer);
  const qMax = (1 << bits) - 1;
  const mid = 1 << (bits - 1);
  const rowElements = (perRow.data * 8) / bits; // K, or K padded to whole blocks

  for (let r = 0; r < rows; r++) {
    const rowStart = r * K;
    for (let b = 0; b < blocks; b++) {
      const start = b * blockSize;
      const end = Math.min(K, start + blockSize);
      let min = 0;
      let max = 0;
      for (let k = start; k < end; k++) {
        const v = values[rowStart + k];
        if (v < min) min = v;
        if (v > max) max = v;
      }
      let scale: number;
      let zero: number;
      if (zeroPoints) {
        scale = storedScale((max - min) / qMax || 1, layout.scaleDtype);
        zero = Math.min(qMax, Math.max(0, Math.round(-min / scale)));
      } else {
        const absMax = Math.max(-min, max);
        scale = storedScale(absMax / (mid - 1) || 1, layout.scaleDtype);
        zero = mid;
      }
      const blockIndex = r * blocks + b;
      writeScale(scaleView, blockIndex, scale, layout.scaleDtype);
      if (zeroPoints) setPacked(zeroPoints, r * perRow.zeroPoints * (8 / bits) + b, zero, bits);
      const base = r * rowElements; // even: rows and blocks start on whole bytes
      const limit = Math.min(start + blockSize, rowElements);
      let low = 0;
      for (let k = start; k < limit; k++) {
        let q = zero;
        if (k < end) {
          q = Math.round(values[rowStart + k] / scale) + zero;
          q = q < 0 ? 0 : q > qMax ? qMax : q;
        }
        if (bits === 8) data[base + k] = q;
        else if ((k & 1) === 0) low = q;
        else data[(base + k) >> 1] = low | (q << 4);
      }
      if (bits === 4 && (limit & 1) === 1) data[(base + limit - 1) >> 1] = low;
    }
  }
  return { data, scales, ...(zeroPoints ? { zeroPoints } : {}) };
}

/** The float32 matrix `[rows, K]` the quantized tensors stand for (what the graph computes with at accuracy level 0). */
export function dequantizeRows(quantized: BlockQuantized, layout: BlockLayout): Float32Array {
  const { cols: K, bits, blockSize } = layout;
  const blocks = blocksPerRow(layout);
  const perRow = rowBytes(layout);
  const rows = quantized.data.byteLength / perRow.data;
  if (!Number.isInteger(rows) || quantized.scales.byteLength !== rows * perRow.scales) {
    throw new RangeError(`dequantizeRows: ${quantized.data.byteLength} data bytes and ${quantized.scales.byteLength} scale bytes do not fit ${K}-wide rows`);
  }
  const scaleView = new DataView(quantized.scales.buffer, quantized.scales.byteOffset, quantized.scales.byteLength);
  const out = new Float32Array(rows * K);
  const mid = 1 << (bits - 1);
  const rowElements = (perRow.data * 8) / bits;
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < blocks; b++) {
      const blockIndex = r * blocks + b;
      const scale = readScale(scaleView, blockIndex, layout.scaleDtype);
      const zero = quantized.zeroPoints ? getPacked(quantized.zeroPoints, r * perRow.zeroPoints * (8 / bits) + b, bits) : mid;
      const end = Math.min(K, (b + 1) * blockSize);
      for (let k = b * blockSize; k < end; k++) {
        out[r * K + k] = (getPacked(quantized.data, r * rowElements + k, bits) - zero) * scale;
      }
    }
  }
  return out;
}
