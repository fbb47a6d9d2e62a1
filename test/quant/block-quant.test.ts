/**
 * meshnet's block quantizer (MatMulNBits / GatherBlockQuantized layouts): packing order,
 * padding of a last partial block, error bounds, zero kept exact, streaming by row chunks.
 */
import { describe, expect, it } from 'vitest';
import { f16BitsToF32, f32ToF16Bits } from '../../src/core/model/dtype.ts';
import { blocksPerRow, dequantizeRows, getPacked, quantizedBytes, quantizeRows, rowBytes, type BlockLayout } from '../../src/core/model/quant/block-quant.ts';
import { mulberry32 } from '../fixtures/checkpoints.ts';

function matrix(rows: number, cols: number, seed: number, scale = 1): Float32Array {
  const rand = mulberry32(seed);
  return Float32Array.from({ length: rows * cols }, () => (rand() * 2 - 1) * scale);
}

const layout = (over: Partial<BlockLayout> = {}): BlockLayout => ({ rows: 6, cols: 172, bits: 4, blockSize: 32, zeroPoints: true, scaleDtype: 'fp32', padded: true, ...over });

describe('block quantization layout', () => {
  it('packs 4-bit values low nibble first, zero points likewise, scales little-endian', () => {
    // One row of 32: values 0..15 twice, asymmetric → min 0 (widened to include 0), max 15.
    const values = Float32Array.from({ length: 32 }, (_, i) => i % 16);
    const q = quantizeRows(values, layout({ rows: 1, cols: 32 }));
    expect(q.scales.byteLength).toBe(4);
    expect(new DataView(q.scales.buffer).getFloat32(0, true)).toBe(1);
    expect(Array.from(q.data.subarray(0, 3))).toEqual([0x10, 0x32, 0x54]); // elements (0,1), (2,3), (4,5)
    expect(q.zeroPoints![0] & 0x0f).toBe(0);
    expect(getPacked(q.data, 31, 4)).toBe(15);
  });

  it('pads the last block of a row whose length the block size does not divide (K = 172)', () => {
    for (const blockSize of [32, 64, 128]) {
      const l = layout({ blockSize });
      const blocks = Math.ceil(172 / blockSize);
      expect(blocksPerRow(l)).toBe(blocks);
      expect(rowBytes(l)).toEqual({ data: (blocks * blockSize) / 2, scales: blocks * 4, zeroPoints: Math.ceil(blocks / 2) });
      const w = matrix(6, 172, blockSize);
      const q = quantizeRows(w, l);
      expect(q.data.byteLength).toBe(quantizedBytes(l).data);
      // The pad holds the block's zero point, so it dequantizes to 0.
      const perRow = rowBytes(l);
      for (let r = 0; r < 6; r++) {
        const zero = getPacked(q.zeroPoints!, r * perRow.zeroPoints * 2 + blocks - 1, 4);
        for (let k = 172; k < blocks * blockSize; k++) expect(getPacked(q.data, r * blocks * blockSize + k, 4)).toBe(zero);
      }
      const back = dequantizeRows(q, l);
      expect(back.length).toBe(w.length);
    }
  });

  it('GatherBlockQuantized rows (unpadded) hold the same values; identical bytes when K is a multiple of the block', () => {
    const w = matrix(5, 172, 3);
    const padded = quantizeRows(w, layout({ rows: 5 }));
    const unpadded = quantizeRows(w, layout({ rows: 5, padded: false }));
    expect(unpadded.data.byteLength).toBe((5 * 172) / 2);
    expect(dequantizeRows(unpadded, layout({ rows: 5, padded: false }))).toEqual(dequantizeRows(padded, layout({ rows: 5 })));
    const even = matrix(5, 128, 4);
    expect(quantizeRows(even, layout({ rows: 5, cols: 128, padded: false })).data).toEqual(quantizeRows(even, layout({ rows: 5, cols: 128 })).data);
  });
});

describe('block quantization error', () => {
  for (const bits of [4, 8] as const) {
    for (const zeroPoints of [true, false]) {
      it(`${bits}-bit ${zeroPoints ? 'asymmetric' : 'symmetric'}: every value within half a step of its block`, () => {
        const l = layout({ bits, zeroPoints, blockSize: 64 });
        const w = matrix(6, 172, bits * 10 + (zeroPoints ? 1 : 0), 0.3);
        const q = quantizeRows(w, l);
        const back = dequantizeRows(q, l);
        const scales = new DataView(q.scales.buffer);
        const blocks = blocksPerRow(l);
        for (let r = 0; r < 6; r++) {
          for (let k = 0; k < 172; k++) {
            const scale = scales.getFloat32((r * blocks + Math.floor(k / 64)) * 4, true);
            expect(Math.abs(back[r * 172 + k] - w[r * 172 + k])).toBeLessThanOrEqual(scale / 2 + 1e-7);
          }
        }
      });
    }
  }

  it('zero stays exactly zero, and a constant block round-trips', () => {
    const w = new Float32Array(2 * 64);
    w.fill(0.25, 0, 64); // row 0 constant, row 1 zeros
    for (const bits of [4, 8] as const) {
      for (const zeroPoints of [true, false]) {
        const l = layout({ rows: 2, cols: 64, bits, zeroPoints });
        const back = dequantizeRows(quantizeRows(w, l), l);
        for (let k = 0; k < 64; k++) {
          expect(back[64 + k]).toBe(0);
          expect(Math.abs(back[k] - 0.25)).toBeLessThan(1e-6);
        }
      }
    }
  });

  it('fp16 scales: values are quantized against the rounded scale the graph will hold', () => {
    const l = layout({ scaleDtype: 'fp16' });
    const w = matrix(6, 172, 9, 0.05);
    const q = quantizeRows(w, l);
    expect(q.scales.byteLength).toBe(6 * 6 * 2);
    const view = new DataView(q.scales.buffer);
    const first = f16BitsToF32(view.getUint16(0, true));
    expect(f16BitsToF32(f32ToF16Bits(first))).toBe(first);
    const back = dequantizeRows(q, l);
    for (let k = 0; k < 32; k++) expect(Math.abs(back[k] - w[k])).toBeLessThanOrEqual(first / 2 + 1e-7);
  });
});

describe('streaming', () => {
  it('quantizing rows in chunks gives the same bytes as all at once', () => {
    const l = layout({ rows: 7, bits: 4 });
    const w = matrix(7, 172, 21);
    const whole = quantizeRows(w, l);
    const a = quantizeRows(w.subarray(0, 3 * 172), l);
    const b = quantizeRows(w.subarray(3 * 172), l);
    expect(new Uint8Array([...a.data, ...b.data])).toEqual(whole.data);
    expect(new Uint8Array([...a.scales, ...b.scales])).toEqual(whole.scales);
    expect(new Uint8Array([...a.zeroPoints!, ...b.zeroPoints!])).toEqual(whole.zeroPoints);
  });

  it('refuses values that are not whole rows', () => {
    expect(() => quantizeRows(new Float32Array(173), layout())).toThrow(/whole rows/);
  });
});
