/**
 * Float conversions for the checkpoint dtypes (F32, F16, BF16). All byte data is
 * little-endian, as safetensors stores it; inputs may start at any byte offset.
 */
import type { FloatDtype, TensorDtype } from './types.ts';

const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);
/** Typed-array views use host byte order; every supported host is little-endian, but check. */
const hostIsLittleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Bytes per element of a dtype. */
export function dtypeItemSize(dtype: TensorDtype): number {
  return dtype === 'F32' || dtype === 'I32' ? 4 : dtype === 'U8' ? 1 : 2;
}

/** IEEE half-precision bits (0..0xffff) to a number. Handles subnormals, ±0, ±inf, NaN. */
export function f16BitsToF32(bits: number): number {
  const negative = (bits & 0x8000) !== 0;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) {
    const value = mantissa * 2 ** -24; // zero or subnormal
    return negative ? -value : value;
  }
  if (exponent === 0x1f) {
    if (mantissa !== 0) return NaN;
    return negative ? -Infinity : Infinity;
  }
  scratchU32[0] = ((negative ? 0x80000000 : 0) | ((exponent + 112) << 23) | (mantissa << 13)) >>> 0;
  return scratchF32[0];
}

/** A number to IEEE half-precision bits, rounding to nearest even; overflow gives ±inf. */
export function f32ToF16Bits(value: number): number {
  scratchF32[0] = value;
  const bits = scratchU32[0];
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  let mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa !== 0 ? 0x200 : 0); // inf, quiet NaN
  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    // Subnormal half (or zero): value = mantissa24 * 2^(halfExponent - 14 - 10).
    if (halfExponent < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - halfExponent; // 14..24
    let half = mantissa >>> shift;
    const rest = mantissa & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rest > halfway || (rest === halfway && (half & 1) === 1)) half++;
    return sign | half;
  }
  let half = (halfExponent << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  // A carry out of the mantissa bumps the exponent, which is the correct rounding (up to inf).
  if (rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1)) half++;
  return sign | half;
}

/** bfloat16 bits (0..0xffff) to a number (exact). */
export function bf16BitsToF32(bits: number): number {
  scratchU32[0] = (bits << 16) >>> 0;
  return scratchF32[0];
}

/** A number to bfloat16 bits, rounding to nearest even; NaN stays a (quiet) NaN. */
export function f32ToBf16Bits(value: number): number {
  scratchF32[0] = value;
  const bits = scratchU32[0];
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) return ((bits >>> 16) | 0x40) & 0xffff;
  const lsb = (bits >>> 16) & 1;
  return ((bits + 0x7fff + lsb) >>> 16) & 0xffff;
}

/**
 * Decodes little-endian tensor bytes of `dtype` into a new Float32Array (never a view of
 * `bytes`). `bytes` may start at any offset; its length must be a multiple of the item size.
 */
export function toFloat32(bytes: Uint8Array, dtype: FloatDtype): Float32Array {
  const itemSize = dtypeItemSize(dtype);
  if (bytes.byteLength % itemSize !== 0) {
    throw new RangeError(`toFloat32: ${bytes.byteLength} bytes is not a multiple of ${itemSize} (${dtype})`);
  }
  const count = bytes.byteLength / itemSize;
  const out = new Float32Array(count);
  if (dtype === 'F32') {
    if (hostIsLittleEndian) {
      // Copy the bytes into the aligned output: works for any input offset.
      new Uint8Array(out.buffer).set(bytes);
      return out;
    }
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let i = 0; i < count; i++) out[i] = view.getFloat32(i * 4, true);
    return out;
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decode = dtype === 'F16' ? f16BitsToF32 : bf16BitsToF32;
  for (let i = 0; i < count; i++) out[i] = decode(view.getUint16(i * 2, true));
  return out;
}

/** Encodes numbers as little-endian bytes of `dtype` (rounding to nearest even for F16/BF16). */
export function fromFloat32(values: ArrayLike<number>, dtype: FloatDtype): Uint8Array {
  const itemSize = dtypeItemSize(dtype);
  const out = new Uint8Array(values.length * itemSize);
  const view = new DataView(out.buffer);
  if (dtype === 'F32') {
    for (let i = 0; i < values.length; i++) view.setFloat32(i * 4, values[i], true);
    return out;
  }
  const encode = dtype === 'F16' ? f32ToF16Bits : f32ToBf16Bits;
  for (let i = 0; i < values.length; i++) view.setUint16(i * 2, encode(values[i]), true);
  return out;
}

/** F32 values → F16 little-endian bytes (round to nearest even). Shorthand for `fromFloat32(values, 'F16')`. */
export function float32ToFloat16Bytes(values: ArrayLike<number>): Uint8Array {
  return fromFloat32(values, 'F16');
}
