/**
 * MXFP4 (OCP microscaling FP4, gpt-oss's experts) as an exact 8-bit MatMulNBits block.
 *
 * An MXFP4 block is 32 e2m1 codes (two a byte, low nibble first) under one e8m0 scale byte s:
 * value = e2m1(code) · 2^(s − 127), e2m1 ∈ {0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6}. Twice an e2m1
 * value is an integer in [−12, 12], so the same block is, exactly,
 *
 *   q = 128 + 2·e2m1(code)   (uint8, MatMulNBits' implied zero point for 8 bits is 128)
 *   scale = 2^(s − 128)      (a power of two: exact in fp32; in fp16 when 2^−24 ≤ scale ≤ 2^15)
 *
 * so (q − 128) · scale = value with no rounding anywhere. Only integer table look-ups and
 * one exponent per block: no float round trip of the weights.
 */
import type { ByteSource } from '../byte-source.ts';
import { f32ToF16Bits } from '../dtype.ts';
import type { Mxfp4Segment, PackedChunk } from '../weight-segments.ts';

/** 2·e2m1(code) for the 16 codes (sign in bit 3). */
export const E2M1_TIMES_TWO = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12] as const;

/** The 8-bit block bytes and scales of `rows` MXFP4 rows (`blocks` [rows, K/32, 16], `scales` [rows, K/32]). */
export function mxfp4ToBlocks(blocks: Uint8Array, scales: Uint8Array, scaleDtype: 'fp32' | 'fp16', name = 'mxfp4'): { data: Uint8Array; scales: Uint8Array } {
  if (blocks.length !== scales.length * 16) throw new RangeError(`${name}: ${blocks.length} block bytes for ${scales.length} scales (16 each expected)`);
  const data = new Uint8Array(blocks.length * 2);
  for (let i = 0; i < blocks.length; i++) {
    const byte = blocks[i];
    data[2 * i] = 128 + E2M1_TIMES_TWO[byte & 0x0f];
    data[2 * i + 1] = 128 + E2M1_TIMES_TWO[byte >> 4];
  }
  const out = new Uint8Array(scales.length * (scaleDtype === 'fp16' ? 2 : 4));
  const view = new DataView(out.buffer);
  for (let b = 0; b < scales.length; b++) {
    const exponent = scales[b] - 128;
    if (scaleDtype === 'fp32') {
      view.setFloat32(b * 4, 2 ** exponent, true); // 2^−128 .. 2^127: normal or subnormal, exact
      continue;
    }
    let nonzero = false;
    for (let j = 0; j < 16 && !nonzero; j++) nonzero = (blocks[b * 16 + j] & 0x77) !== 0;
    if (nonzero && (exponent < -24 || exponent > 15)) throw new RangeError(`${name}: block ${b}'s scale 2^${exponent} is not exact in fp16 (use fp32 activations)`);
    view.setUint16(b * 2, nonzero ? f32ToF16Bits(2 ** exponent) : 0, true);
  }
  return { data, scales: out };
}

/** Packs one Mxfp4Segment, a few MiB of rows at a time. */
export async function* packMxfp4(segment: Mxfp4Segment, reader: ByteSource, chunkBytes: number): AsyncGenerator<PackedChunk> {
  const { blocks, scales, layout, out } = segment;
  const kBlocks = layout.cols / 32;
  const perRow = { blocks: kBlocks * 16, scales: kBlocks, data: kBlocks * 32, outScales: kBlocks * (layout.scaleDtype === 'fp16' ? 2 : 4) };
  const rowsPerChunk = Math.max(1, Math.floor(chunkBytes / perRow.blocks));
  for (let row = 0; row < layout.rows; row += rowsPerChunk) {
    const rows = Math.min(rowsPerChunk, layout.rows - row);
    const b = await reader.read(blocks.file, blocks.offset + row * perRow.blocks, rows * perRow.blocks);
    const s = await reader.read(scales.file, scales.offset + row * perRow.scales, rows * perRow.scales);
    if (b.byteLength !== rows * perRow.blocks || s.byteLength !== rows * perRow.scales) throw new RangeError(`${segment.name}: short read of ${blocks.file}`);
    const packed = mxfp4ToBlocks(b, s, layout.scaleDtype, segment.name);
    yield { offset: out.data.offset + row * perRow.data, bytes: packed.data };
    yield { offset: out.scales.offset + row * perRow.outScales, bytes: packed.scales };
  }
}
