/**
 * ggml's reference quantizers for Q8_0 and Q4_0 (ggml-quants.c `quantize_row_q8_0_ref`,
 * `quantize_row_q4_0_ref`) and their dequantizers, over rows whose length is a whole
 * number of 32-value blocks. Arithmetic is rounded to float32 where C computes in float,
 * so the blocks are what llama.cpp's own quantizer writes for the same values.
 *
 * Q8_0 block (34 bytes): f16 d = max|x| / 127, then 32 × int8 round(x / d) (half away from zero).
 * Q4_0 block (18 bytes): f16 d = m / −8 where m is the value of largest magnitude (sign kept),
 *   then 16 bytes: byte j holds q(x[j]) in its low nibble and q(x[j + 16]) in its high one,
 *   q(x) = min(15, trunc(x / d + 8.5)); x ≈ (q − 8)·d.
 */
import { f16BitsToF32, f32ToF16Bits } from '../../src/core/model/dtype.ts';
import { GGML_BLOCK, GgmlType } from './gguf-format.ts';

const QK = 32;
const f = Math.fround;

function checkLength(values: ArrayLike<number>, type: GgmlType): number {
  if (values.length % QK !== 0) throw new RangeError(`${GgmlType[type]}: ${values.length} values are not whole blocks of ${QK}`);
  return values.length / QK;
}

/** C's roundf: half away from zero. */
const roundAway = (x: number) => (x < 0 ? -Math.round(-x) : Math.round(x));

export function quantizeQ8_0(values: ArrayLike<number>): Uint8Array {
  const blocks = checkLength(values, GgmlType.Q8_0);
  const out = new Uint8Array(blocks * GGML_BLOCK[GgmlType.Q8_0].bytes);
  const view = new DataView(out.buffer);
  const qs = new Int8Array(out.buffer);
  for (let b = 0; b < blocks; b++) {
    const base = b * QK;
    let amax = 0;
    for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(values[base + j]));
    const d = f(f(amax) / 127);
    const id = d ? f(1 / d) : 0;
    const at = b * 34;
    view.setUint16(at, f32ToF16Bits(d), true);
    for (let j = 0; j < QK; j++) qs[at + 2 + j] = roundAway(f(values[base + j] * id));
  }
  return out;
}

export function quantizeQ4_0(values: ArrayLike<number>): Uint8Array {
  const blocks = checkLength(values, GgmlType.Q4_0);
  const out = new Uint8Array(blocks * GGML_BLOCK[GgmlType.Q4_0].bytes);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    const base = b * QK;
    let amax = 0;
    let max = 0;
    for (let j = 0; j < QK; j++) {
      const v = values[base + j];
      if (amax < Math.abs(v)) (amax = Math.abs(v)), (max = v);
    }
    const d = f(f(max) / -8);
    const id = d ? f(1 / d) : 0;
    const at = b * 18;
    view.setUint16(at, f32ToF16Bits(d), true);
    for (let j = 0; j < QK / 2; j++) {
      // (int8_t)(x + 8.5f) truncates toward zero; x·id ≥ −8, so the sum is ≥ 0.5 and trunc is floor.
      const low = Math.min(15, Math.trunc(f(f(values[base + j] * id) + 8.5)));
      const high = Math.min(15, Math.trunc(f(f(values[base + QK / 2 + j] * id) + 8.5)));
      out[at + 2 + j] = low | (high << 4);
    }
  }
  return out;
}

export function dequantizeQ8_0(bytes: Uint8Array): Float32Array {
  const blocks = bytes.byteLength / 34;
  const out = new Float32Array(blocks * QK);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let b = 0; b < blocks; b++) {
    const d = f16BitsToF32(view.getUint16(b * 34, true));
    for (let j = 0; j < QK; j++) out[b * QK + j] = view.getInt8(b * 34 + 2 + j) * d;
  }
  return out;
}

export function dequantizeQ4_0(bytes: Uint8Array): Float32Array {
  const blocks = bytes.byteLength / 18;
  const out = new Float32Array(blocks * QK);
  for (let b = 0; b < blocks; b++) {
    const at = bytes.byteOffset + b * 18;
    const d = f16BitsToF32(new DataView(bytes.buffer, at, 2).getUint16(0, true));
    for (let j = 0; j < QK / 2; j++) {
      const q = bytes[b * 18 + 2 + j];
      out[b * QK + j] = ((q & 0x0f) - 8) * d;
      out[b * QK + QK / 2 + j] = ((q >> 4) - 8) * d;
    }
  }
  return out;
}

/** Encodes float32 values as `type` (rows of whole blocks for the quantized types). */
export function encodeGgml(values: Float32Array, type: GgmlType): Uint8Array {
  switch (type) {
    case GgmlType.F32:
      return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
    case GgmlType.F16: {
      const out = new Uint8Array(values.length * 2);
      const view = new DataView(out.buffer);
      for (let i = 0; i < values.length; i++) view.setUint16(i * 2, f32ToF16Bits(values[i]), true);
      return out;
    }
    case GgmlType.Q8_0:
      return quantizeQ8_0(values);
    case GgmlType.Q4_0:
      return quantizeQ4_0(values);
  }
}

/** Decodes `type` bytes back to float32. */
export function decodeGgml(bytes: Uint8Array, type: GgmlType): Float32Array {
  switch (type) {
    case GgmlType.F32: {
      const out = new Float32Array(bytes.byteLength / 4);
      new Uint8Array(out.buffer).set(bytes);
      return out;
    }
    case GgmlType.F16: {
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      return Float32Array.from({ length: bytes.byteLength / 2 }, (_, i) => f16BitsToF32(view.getUint16(i * 2, true)));
    }
    case GgmlType.Q8_0:
      return dequantizeQ8_0(bytes);
    case GgmlType.Q4_0:
      return dequantizeQ4_0(bytes);
  }
}
