/**
 * safetensors header reader and a small writer (for fixtures).
 *
 *   offset 0        8                 8 + headerLength
 *          +--------+-----------------+---------------------------------+
 *          | u64 LE | JSON header     | tensor data (offsets relative   |
 *          | length | (UTF-8, padded) |  to the start of this region)   |
 *          +--------+-----------------+---------------------------------+
 *
 * The header maps tensor names to `{ dtype, shape, data_offsets: [begin, end] }`; the key
 * `__metadata__` holds string metadata and is skipped. Every field is checked against the
 * file size before anything trusts it.
 */
import { CheckpointError } from './checkpoint-error.ts';
import { dtypeItemSize } from './dtype.ts';
import type { TensorDtype, TensorLocation } from './types.ts';

/** Bytes before the JSON header: its little-endian u64 length. */
export const SAFETENSORS_PREFIX_BYTES = 8;
/** Headers larger than this are refused (the reference implementation uses the same cap). */
export const SAFETENSORS_MAX_HEADER_BYTES = 100_000_000;

const SUPPORTED_DTYPES: readonly TensorDtype[] = ['F32', 'F16', 'BF16', 'I32', 'U8'];

/**
 * Reads and checks the header length from a file's first 8 bytes.
 * @returns the JSON header's byte length; the data region starts at `8 + length`.
 * @throws CheckpointError when the file is shorter than 8 bytes or the length does not fit.
 */
export function safetensorsHeaderLength(file: string, prefix: Uint8Array, fileSize: number): number {
  if (fileSize < SAFETENSORS_PREFIX_BYTES || prefix.byteLength < SAFETENSORS_PREFIX_BYTES) {
    throw new CheckpointError(file, `file is ${fileSize} bytes, shorter than the 8-byte safetensors header length`);
  }
  const length = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true);
  if (length > BigInt(fileSize - SAFETENSORS_PREFIX_BYTES)) {
    throw new CheckpointError(file, `safetensors header length ${length} is larger than the file (${fileSize} bytes)`);
  }
  if (length > BigInt(SAFETENSORS_MAX_HEADER_BYTES)) {
    throw new CheckpointError(file, `safetensors header length ${length} exceeds the ${SAFETENSORS_MAX_HEADER_BYTES}-byte limit`);
  }
  return Number(length);
}

/**
 * Parses a safetensors header.
 * @param file name used in errors and stored in each TensorLocation.
 * @param headerBytes the file's bytes from offset 0, at least `8 + headerLength` of them.
 * @param fileSize the whole file's size in bytes.
 * @returns tensors by name, with ABSOLUTE file offsets (`8 + headerLength + begin`).
 * @throws CheckpointError naming the file and the exact problem.
 */
export function parseSafetensorsHeader(file: string, headerBytes: Uint8Array, fileSize: number): Map<string, TensorLocation> {
  const headerLength = safetensorsHeaderLength(file, headerBytes, fileSize);
  const dataStart = SAFETENSORS_PREFIX_BYTES + headerLength;
  if (headerBytes.byteLength < dataStart) {
    throw new CheckpointError(file, `safetensors header is truncated: need ${dataStart} bytes, got ${headerBytes.byteLength}`);
  }
  let text: string;
  let header: unknown;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(headerBytes.subarray(SAFETENSORS_PREFIX_BYTES, dataStart));
  } catch {
    throw new CheckpointError(file, 'safetensors header is not valid UTF-8');
  }
  try {
    header = JSON.parse(text);
  } catch (error) {
    throw new CheckpointError(file, `safetensors header is not valid JSON (${(error as Error).message})`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) {
    throw new CheckpointError(file, 'safetensors header is not a JSON object');
  }
  const dataSize = fileSize - dataStart;
  const tensors = new Map<string, TensorLocation>();
  const spans: { name: string; begin: number; end: number }[] = [];
  for (const [name, entry] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') continue;
    const location = parseEntry(file, name, entry, dataStart, dataSize);
    tensors.set(name, location);
    spans.push({ name, begin: location.offset, end: location.offset + location.length });
  }
  // Empty tensors occupy no bytes and cannot overlap anything.
  const occupied = spans.filter((span) => span.end > span.begin).sort((a, b) => a.begin - b.begin);
  let furthest: { name: string; end: number } | undefined;
  for (const span of occupied) {
    if (furthest !== undefined && span.begin < furthest.end) {
      throw new CheckpointError(file, `tensors '${furthest.name}' and '${span.name}' overlap in the data region`);
    }
    if (furthest === undefined || span.end > furthest.end) furthest = span;
  }
  return tensors;
}

function parseEntry(file: string, name: string, entry: unknown, dataStart: number, dataSize: number): TensorLocation {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
    throw new CheckpointError(file, `tensor '${name}': header entry is not an object`);
  }
  const { dtype, shape, data_offsets: offsets } = entry as Record<string, unknown>;
  if (typeof dtype !== 'string' || !(SUPPORTED_DTYPES as readonly string[]).includes(dtype)) {
    throw new CheckpointError(file, `tensor '${name}': unsupported dtype ${JSON.stringify(dtype)} (supported: ${SUPPORTED_DTYPES.join(', ')})`);
  }
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw new CheckpointError(file, `tensor '${name}': shape ${JSON.stringify(shape)} is not an array of non-negative integers`);
  }
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => Number.isSafeInteger(o) && o >= 0)) {
    throw new CheckpointError(file, `tensor '${name}': data_offsets ${JSON.stringify(offsets)} is not [begin, end] of non-negative integers`);
  }
  const [begin, end] = offsets as [number, number];
  if (end < begin) {
    throw new CheckpointError(file, `tensor '${name}': data_offsets end ${end} is before begin ${begin}`);
  }
  const elements = (shape as number[]).reduce((product, d) => product * d, 1);
  const expected = elements * dtypeItemSize(dtype as TensorDtype);
  if (end - begin !== expected) {
    throw new CheckpointError(
      file,
      `tensor '${name}': byte length ${end - begin} does not match shape [${shape.join(', ')}] × ${dtype} (${expected} bytes)`,
    );
  }
  if (end > dataSize) {
    throw new CheckpointError(file, `tensor '${name}': data_offsets [${begin}, ${end}] extend beyond the end of the file (data region is ${dataSize} bytes)`);
  }
  return { name, file, dtype: dtype as TensorDtype, shape: [...(shape as number[])], offset: dataStart + begin, length: end - begin };
}

/** One tensor for `writeSafetensors`: `data` holds little-endian bytes of `dtype`. */
export interface SafetensorsInput {
  readonly name: string;
  readonly dtype: TensorDtype;
  readonly shape: readonly number[];
  readonly data: Uint8Array;
}

/**
 * Serializes tensors in the given order, like the Hugging Face writer: JSON header padded
 * with spaces so the data region starts at a multiple of 8 bytes.
 * @throws RangeError when a tensor's data length does not match its shape and dtype.
 */
export function writeSafetensors(tensors: readonly SafetensorsInput[], metadata?: Readonly<Record<string, string>>): Uint8Array {
  const header: Record<string, unknown> = {};
  if (metadata !== undefined) header.__metadata__ = metadata;
  let cursor = 0;
  for (const tensor of tensors) {
    const expected = tensor.shape.reduce((product, d) => product * d, 1) * dtypeItemSize(tensor.dtype);
    if (tensor.data.byteLength !== expected) {
      throw new RangeError(`writeSafetensors: '${tensor.name}' has ${tensor.data.byteLength} bytes, shape needs ${expected}`);
    }
    header[tensor.name] = { dtype: tensor.dtype, shape: [...tensor.shape], data_offsets: [cursor, cursor + expected] };
    cursor += expected;
  }
  let json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.byteLength / 8) * 8;
  const headerBytes = new Uint8Array(padded).fill(0x20);
  headerBytes.set(json);
  json = headerBytes;
  const out = new Uint8Array(SAFETENSORS_PREFIX_BYTES + padded + cursor);
  new DataView(out.buffer).setBigUint64(0, BigInt(padded), true);
  out.set(json, SAFETENSORS_PREFIX_BYTES);
  let offset = SAFETENSORS_PREFIX_BYTES + padded;
  for (const tensor of tensors) {
    out.set(tensor.data, offset);
    offset += tensor.data.byteLength;
  }
  return out;
}
