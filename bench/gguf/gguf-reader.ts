/**
 * A small GGUF v3 reader: header, metadata, tensor infos, and one tensor's bytes on demand.
 * It exists to check what bench/gguf/gguf-writer.ts wrote (tests, bench:llama-check), so it
 * validates everything it reads — magic, version, lengths, types, offsets, alignment — and
 * refuses a malformed file with a GgufFormatError naming the file and what is wrong.
 */
import { open } from 'node:fs/promises';
import { alignUp, GGML_BLOCK, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GgmlType, ggmlTensorBytes, GgufValueType } from './gguf-format.ts';

export class GgufFormatError extends Error {
  constructor(readonly file: string, detail: string) {
    super(`${file}: ${detail}`);
    this.name = 'GgufFormatError';
  }
}

export type GgufScalar = number | bigint | boolean | string;
export type GgufReadValue = GgufScalar | GgufScalar[];

export interface GgufTensorInfo {
  readonly name: string;
  readonly ne: readonly number[];
  readonly type: GgmlType;
  /** Offset from the start of the data section. */
  readonly offset: number;
  readonly bytes: number;
}

export interface GgufFile {
  readonly path: string;
  readonly version: number;
  readonly metadata: ReadonlyMap<string, GgufReadValue>;
  /** The GGUF value type of each metadata entry (arrays: their element type). */
  readonly metadataTypes: ReadonlyMap<string, { readonly type: GgufValueType; readonly elementType?: GgufValueType }>;
  readonly tensors: readonly GgufTensorInfo[];
  readonly alignment: number;
  /** Absolute file offset of the data section. */
  readonly dataOffset: number;
  readonly fileBytes: number;
  /** One tensor's bytes, read from the file. */
  readTensor(name: string): Promise<Uint8Array>;
}

class OutOfData extends Error {}

class Cursor {
  at = 0;
  private readonly view: DataView;
  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  private need(n: number) {
    if (this.at + n > this.bytes.byteLength) throw new OutOfData();
    const at = this.at;
    this.at += n;
    return at;
  }
  u8 = () => this.view.getUint8(this.need(1));
  i8 = () => this.view.getInt8(this.need(1));
  u16 = () => this.view.getUint16(this.need(2), true);
  i16 = () => this.view.getInt16(this.need(2), true);
  u32 = () => this.view.getUint32(this.need(4), true);
  i32 = () => this.view.getInt32(this.need(4), true);
  f32 = () => this.view.getFloat32(this.need(4), true);
  f64 = () => this.view.getFloat64(this.need(8), true);
  u64 = () => this.view.getBigUint64(this.need(8), true);
  i64 = () => this.view.getBigInt64(this.need(8), true);
  /** A u64 that must fit a JS number (lengths, dims, offsets). */
  size(what: string, max = Number.MAX_SAFE_INTEGER) {
    const v = this.u64();
    if (v > BigInt(max)) throw new RangeError(`${what} ${v} is out of range`);
    return Number(v);
  }
  string() {
    const length = this.size('string length', 1 << 30);
    const at = this.need(length);
    return new TextDecoder('utf-8', { fatal: true }).decode(this.bytes.subarray(at, at + length));
  }
}

function readScalar(c: Cursor, type: GgufValueType): GgufScalar {
  switch (type) {
    case GgufValueType.UINT8: return c.u8();
    case GgufValueType.INT8: return c.i8();
    case GgufValueType.UINT16: return c.u16();
    case GgufValueType.INT16: return c.i16();
    case GgufValueType.UINT32: return c.u32();
    case GgufValueType.INT32: return c.i32();
    case GgufValueType.FLOAT32: return c.f32();
    case GgufValueType.FLOAT64: return c.f64();
    case GgufValueType.BOOL: {
      const b = c.u8();
      if (b > 1) throw new RangeError(`bool value ${b}`);
      return b === 1;
    }
    case GgufValueType.UINT64: return c.u64();
    case GgufValueType.INT64: return c.i64();
    case GgufValueType.STRING: return c.string();
    default: throw new RangeError(`unknown value type ${type}`);
  }
}

function parseHeader(path: string, bytes: Uint8Array, fileBytes: number) {
  const c = new Cursor(bytes);
  if (c.u32() !== GGUF_MAGIC) throw new GgufFormatError(path, 'not a GGUF file (bad magic)');
  const version = c.u32();
  if (version !== 3) throw new GgufFormatError(path, `GGUF version ${version}; this reader reads version 3`);
  const tensorCount = c.size('tensor count', 1 << 20);
  const metadataCount = c.size('metadata count', 1 << 20);
  const metadata = new Map<string, GgufReadValue>();
  const metadataTypes = new Map<string, { type: GgufValueType; elementType?: GgufValueType }>();
  for (let i = 0; i < metadataCount; i++) {
    const key = c.string();
    if (metadata.has(key)) throw new GgufFormatError(path, `metadata key '${key}' appears twice`);
    const type = c.u32() as GgufValueType;
    if (type === GgufValueType.ARRAY) {
      const elementType = c.u32() as GgufValueType;
      if (elementType === GgufValueType.ARRAY) throw new GgufFormatError(path, `metadata '${key}': nested arrays are not supported`);
      const count = c.size(`metadata '${key}' array length`, 1 << 26);
      const items: GgufScalar[] = [];
      for (let j = 0; j < count; j++) items.push(readScalar(c, elementType));
      metadata.set(key, items);
      metadataTypes.set(key, { type, elementType });
    } else {
      metadata.set(key, readScalar(c, type));
      metadataTypes.set(key, { type });
    }
  }
  const alignmentValue = metadata.get('general.alignment');
  const alignment = alignmentValue === undefined ? GGUF_DEFAULT_ALIGNMENT : Number(alignmentValue);
  if (!Number.isInteger(alignment) || alignment <= 0 || alignment % 8 !== 0) throw new GgufFormatError(path, `general.alignment ${alignment} is not a positive multiple of 8`);
  const tensors: GgufTensorInfo[] = [];
  const names = new Set<string>();
  for (let i = 0; i < tensorCount; i++) {
    const name = c.string();
    if (names.has(name)) throw new GgufFormatError(path, `tensor '${name}' appears twice`);
    names.add(name);
    const dims = c.u32();
    if (dims < 1 || dims > 4) throw new GgufFormatError(path, `tensor '${name}' has ${dims} dimensions (1–4 allowed)`);
    const ne = Array.from({ length: dims }, () => c.size(`tensor '${name}' dimension`, 2 ** 40));
    const type = c.u32();
    if (!(type in GGML_BLOCK)) throw new GgufFormatError(path, `tensor '${name}' has ggml type ${type}, which this reader does not know`);
    const offset = c.size(`tensor '${name}' offset`);
    if (offset % alignment !== 0) throw new GgufFormatError(path, `tensor '${name}' offset ${offset} is not a multiple of the alignment ${alignment}`);
    let bytes: number;
    try {
      bytes = ggmlTensorBytes(type, ne);
    } catch (error) {
      throw new GgufFormatError(path, `tensor '${name}': ${(error as Error).message}`);
    }
    tensors.push({ name, ne, type, offset, bytes });
  }
  const dataOffset = alignUp(c.at, alignment);
  // Tensors must not overlap and must lie inside the file.
  const sorted = [...tensors].sort((a, b) => a.offset - b.offset);
  for (let i = 0; i < sorted.length; i++) {
    const t = sorted[i];
    if (i + 1 < sorted.length && t.offset + t.bytes > sorted[i + 1].offset) throw new GgufFormatError(path, `tensor '${t.name}' overlaps '${sorted[i + 1].name}'`);
    if (dataOffset + t.offset + t.bytes > fileBytes) throw new GgufFormatError(path, `tensor '${t.name}' ends past the end of the file (${fileBytes} bytes)`);
  }
  return { version, metadata, metadataTypes, tensors, alignment, dataOffset };
}

/** Opens and validates the GGUF file at `path` (reads its header; tensor data on demand). */
export async function readGguf(path: string): Promise<GgufFile> {
  const file = await open(path, 'r');
  try {
    const fileBytes = (await file.stat()).size;
    // The header's size is not known up front: read a prefix, and a longer one if it ran out.
    for (let prefix = Math.min(fileBytes, 1 << 20); ; prefix = Math.min(fileBytes, prefix * 4)) {
      const bytes = new Uint8Array(prefix);
      await file.read(bytes, 0, prefix, 0);
      try {
        const header = parseHeader(path, bytes, fileBytes);
        const byName = new Map(header.tensors.map((t) => [t.name, t]));
        return {
          path,
          fileBytes,
          ...header,
          async readTensor(name) {
            const t = byName.get(name);
            if (!t) throw new GgufFormatError(path, `no tensor '${name}'`);
            const handle = await open(path, 'r');
            try {
              const out = new Uint8Array(t.bytes);
              await handle.read(out, 0, t.bytes, header.dataOffset + t.offset);
              return out;
            } finally {
              await handle.close();
            }
          },
        };
      } catch (error) {
        if (error instanceof OutOfData) {
          if (prefix === fileBytes) throw new GgufFormatError(path, 'the header runs past the end of the file');
          continue;
        }
        if (error instanceof GgufFormatError) throw error;
        throw new GgufFormatError(path, (error as Error).message);
      }
    }
  } finally {
    await file.close();
  }
}
