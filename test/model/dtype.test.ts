import { describe, expect, it } from 'vitest';
import {
  bf16BitsToF32,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  float32ToFloat16Bytes,
  fromFloat32,
  toFloat32,
} from '../../src/core/model/dtype.ts';

describe('f16', () => {
  it('decodes known bit patterns', () => {
    expect(f16BitsToF32(0x0000)).toBe(0);
    expect(Object.is(f16BitsToF32(0x8000), -0)).toBe(true);
    expect(f16BitsToF32(0x3c00)).toBe(1);
    expect(f16BitsToF32(0xc000)).toBe(-2);
    expect(f16BitsToF32(0x3555)).toBeCloseTo(0.333251953125, 12);
    expect(f16BitsToF32(0x7bff)).toBe(65504);
    expect(f16BitsToF32(0x0001)).toBe(2 ** -24); // smallest subnormal
    expect(f16BitsToF32(0x03ff)).toBe(1023 * 2 ** -24); // largest subnormal
    expect(f16BitsToF32(0x0400)).toBe(2 ** -14); // smallest normal
    expect(f16BitsToF32(0x7c00)).toBe(Infinity);
    expect(f16BitsToF32(0xfc00)).toBe(-Infinity);
    expect(f16BitsToF32(0x7e00)).toBeNaN();
  });

  it('round-trips every non-NaN bit pattern exactly', () => {
    for (let bits = 0; bits < 0x10000; bits++) {
      const exponent = (bits >>> 10) & 0x1f;
      if (exponent === 0x1f && (bits & 0x3ff) !== 0) continue;
      expect(f32ToF16Bits(f16BitsToF32(bits))).toBe(bits);
    }
  });

  it('rounds to nearest, ties to even', () => {
    const ulpAtOne = 2 ** -10;
    expect(f32ToF16Bits(1 + ulpAtOne / 2)).toBe(0x3c00); // tie → even (down)
    expect(f32ToF16Bits(1 + (3 * ulpAtOne) / 2)).toBe(0x3c02); // tie → even (up)
    expect(f32ToF16Bits(1 + ulpAtOne * 0.51)).toBe(0x3c01);
    expect(f32ToF16Bits(2 ** -25)).toBe(0); // half the smallest subnormal: tie → 0
    expect(f32ToF16Bits(2 ** -25 * 1.01)).toBe(1);
    expect(f32ToF16Bits(3 * 2 ** -25)).toBe(2); // 1.5 subnormal ulps: tie → even
    expect(f32ToF16Bits(65519)).toBe(0x7bff);
    expect(f32ToF16Bits(65520)).toBe(0x7c00); // rounds up to infinity
    expect(f32ToF16Bits(1e10)).toBe(0x7c00);
    expect(f32ToF16Bits(-1e-10)).toBe(0x8000);
    expect(f16BitsToF32(f32ToF16Bits(NaN))).toBeNaN();
  });
});

describe('bf16', () => {
  it('decodes and encodes known values', () => {
    expect(bf16BitsToF32(0x3f80)).toBe(1);
    expect(bf16BitsToF32(0xc040)).toBe(-3);
    expect(bf16BitsToF32(0x7f80)).toBe(Infinity);
    expect(f32ToBf16Bits(1)).toBe(0x3f80);
    expect(f32ToBf16Bits(-3)).toBe(0xc040);
    expect(f32ToBf16Bits(Infinity)).toBe(0x7f80);
    expect(bf16BitsToF32(f32ToBf16Bits(NaN))).toBeNaN();
  });

  it('rounds to nearest, ties to even', () => {
    const ulp = 2 ** -7;
    expect(f32ToBf16Bits(1 + ulp / 2)).toBe(0x3f80);
    expect(f32ToBf16Bits(1 + (3 * ulp) / 2)).toBe(0x3f82);
    expect(f32ToBf16Bits(1 + ulp * 0.6)).toBe(0x3f81);
    expect(f32ToBf16Bits(3.4e38)).toBe(0x7f80); // above bf16 max rounds to inf
  });
});

describe('toFloat32 / fromFloat32', () => {
  const values = [0, 1, -2.5, 0.1, 1000, -65504];
  for (const dtype of ['F32', 'F16', 'BF16'] as const) {
    it(`round-trips ${dtype}, also from an unaligned offset`, () => {
      const bytes = fromFloat32(values, dtype);
      const expected = Array.from(toFloat32(bytes, dtype));
      const tolerance = dtype === 'F32' ? 1e-7 : dtype === 'F16' ? 1e-3 : 1e-2;
      expected.forEach((v, i) => expect(Math.abs(v - values[i])).toBeLessThanOrEqual(tolerance * Math.max(1, Math.abs(values[i]))));
      const shifted = new Uint8Array(bytes.byteLength + 3);
      shifted.set(bytes, 3);
      const unaligned = shifted.subarray(3);
      expect(unaligned.byteOffset % 4).toBe(3);
      const decoded = toFloat32(unaligned, dtype);
      expect(Array.from(decoded)).toEqual(expected);
      expect(decoded.buffer).not.toBe(shifted.buffer);
    });
  }

  it('refuses a length that is not a multiple of the item size', () => {
    expect(() => toFloat32(new Uint8Array(3), 'F16')).toThrow(RangeError);
  });

  it('float32ToFloat16Bytes matches fromFloat32 F16', () => {
    expect(float32ToFloat16Bytes(new Float32Array(values))).toEqual(fromFloat32(values, 'F16'));
  });
});
