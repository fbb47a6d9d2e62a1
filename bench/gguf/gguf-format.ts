/**
 * GGUF v3 constants (ggml's gguf.h, gguf-py's constants.py): value types, the ggml tensor
 * types this bench writes, and their block layouts.
 *
 * File layout (all little-endian):
 *
 *   u32 magic "GGUF" | u32 version 3 | u64 tensor count | u64 metadata count
 *   metadata: { string key | u32 value type | value }*
 *   tensor infos: { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset }*
 *   padding to `general.alignment` (default 32)
 *   tensor data: each tensor at data start + its offset (a multiple of the alignment)
 *
 * A string is u64 byte length + UTF-8 bytes; an array is u32 element type + u64 count +
 * elements. `ne[0]` is the innermost (contiguous) dimension: a Hugging Face `[out, in]`
 * linear weight is `ne = [in, out]`, and quantization blocks run along `ne[0]`.
 */

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;
/** ggml's GGML_QNT_VERSION: the Q4_0/Q8_0 layouts below. */
export const GGML_QUANTIZATION_VERSION = 2;

export enum GgufValueType {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
}

/** The ggml tensor types this bench writes (ggml.h `enum ggml_type`). */
export enum GgmlType {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
}

export type GgmlTypeName = keyof typeof GgmlType;

/**
 * Values per block and bytes per block:
 * - Q8_0: `{ f16 d; i8 qs[32] }`, x = qs[j]·d.
 * - Q4_0: `{ f16 d; u8 qs[16] }`, value j (< 16) in the low nibble of qs[j], value j + 16 in
 *   its high nibble, x = (nibble − 8)·d.
 */
export const GGML_BLOCK: Readonly<Record<GgmlType, { readonly values: number; readonly bytes: number }>> = {
  [GgmlType.F32]: { values: 1, bytes: 4 },
  [GgmlType.F16]: { values: 1, bytes: 2 },
  [GgmlType.Q4_0]: { values: 32, bytes: 18 },
  [GgmlType.Q8_0]: { values: 32, bytes: 34 },
};

/** llama.cpp's `llama_ftype` (`general.file_type`): the type most tensors have. */
export const LLAMA_FILE_TYPE: Readonly<Record<GgmlTypeName, number>> = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 7 };

/** Bytes of a tensor of `type` with dimensions `ne` (ne[0] first). Throws if ne[0] is not a whole number of blocks. */
export function ggmlTensorBytes(type: GgmlType, ne: readonly number[]): number {
  const block = GGML_BLOCK[type];
  if (ne[0] % block.values !== 0) {
    throw new RangeError(`a ${GgmlType[type]} row holds whole blocks of ${block.values} values; ne[0] = ${ne[0]}`);
  }
  const rows = ne.slice(1).reduce((a, b) => a * b, 1);
  return (ne[0] / block.values) * block.bytes * rows;
}

/** `offset` rounded up to a multiple of `alignment`. */
export const alignUp = (offset: number, alignment: number) => Math.ceil(offset / alignment) * alignment;

/** One metadata value with its GGUF type (arrays carry their element type). */
export type GgufValue =
  | { readonly type: GgufValueType.STRING; readonly value: string }
  | { readonly type: GgufValueType.BOOL; readonly value: boolean }
  | { readonly type: GgufValueType.UINT32 | GgufValueType.INT32 | GgufValueType.FLOAT32 | GgufValueType.UINT8 | GgufValueType.INT8 | GgufValueType.UINT16 | GgufValueType.INT16 | GgufValueType.FLOAT64; readonly value: number }
  | { readonly type: GgufValueType.UINT64 | GgufValueType.INT64; readonly value: bigint }
  | { readonly type: GgufValueType.ARRAY; readonly elementType: GgufValueType.STRING; readonly value: readonly string[] }
  | { readonly type: GgufValueType.ARRAY; readonly elementType: GgufValueType.INT32 | GgufValueType.UINT32 | GgufValueType.FLOAT32; readonly value: readonly number[] };

/** Shorthands for metadata values. */
export const gguf = {
  string: (value: string): GgufValue => ({ type: GgufValueType.STRING, value }),
  u32: (value: number): GgufValue => ({ type: GgufValueType.UINT32, value }),
  f32: (value: number): GgufValue => ({ type: GgufValueType.FLOAT32, value }),
  bool: (value: boolean): GgufValue => ({ type: GgufValueType.BOOL, value }),
  strings: (value: readonly string[]): GgufValue => ({ type: GgufValueType.ARRAY, elementType: GgufValueType.STRING, value }),
  f32s: (value: readonly number[]): GgufValue => ({ type: GgufValueType.ARRAY, elementType: GgufValueType.FLOAT32, value }),
  i32s: (value: readonly number[]): GgufValue => ({ type: GgufValueType.ARRAY, elementType: GgufValueType.INT32, value }),
};
