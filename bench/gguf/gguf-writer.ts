/**
 * A streaming GGUF v3 writer. The header (metadata and every tensor's info) is computed from
 * the tensor plans alone — a tensor's byte size follows from its type and dimensions — then
 * each tensor's bytes are produced and written one at a time, so memory holds one tensor,
 * never the model. The file is written beside its final name and renamed at the end, so an
 * interrupted write leaves no half-written GGUF under that name.
 */
import { open, rename, rm } from 'node:fs/promises';
import { alignUp, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION, GgmlType, ggmlTensorBytes, type GgufValue, GgufValueType } from './gguf-format.ts';

export interface GgufTensorPlan {
  readonly name: string;
  /** Dimensions, innermost first (ggml's ne): a `[out, in]` matrix is `[in, out]`. */
  readonly ne: readonly number[];
  readonly type: GgmlType;
  /** The tensor's bytes in `type`'s layout; called once, when it is written. */
  data(): Promise<Uint8Array>;
}

export interface GgufWriteSummary {
  readonly path: string;
  readonly bytes: number;
  readonly dataOffset: number;
  readonly tensors: readonly { readonly name: string; readonly type: GgmlType; readonly ne: readonly number[]; readonly offset: number; readonly bytes: number }[];
}

class ByteWriter {
  private chunks: Uint8Array[] = [];
  length = 0;
  private push(bytes: Uint8Array) {
    this.chunks.push(bytes);
    this.length += bytes.byteLength;
  }
  private fixed(size: number, set: (view: DataView) => void) {
    const bytes = new Uint8Array(size);
    set(new DataView(bytes.buffer));
    this.push(bytes);
  }
  u32 = (v: number) => this.fixed(4, (d) => d.setUint32(0, v, true));
  i32 = (v: number) => this.fixed(4, (d) => d.setInt32(0, v, true));
  u64 = (v: number | bigint) => this.fixed(8, (d) => d.setBigUint64(0, BigInt(v), true));
  string(s: string) {
    const bytes = new TextEncoder().encode(s);
    this.u64(bytes.byteLength);
    this.push(bytes);
  }
  scalar(type: GgufValueType, v: number | bigint | boolean | string): void {
    switch (type) {
      case GgufValueType.UINT8: return this.fixed(1, (d) => d.setUint8(0, Number(v)));
      case GgufValueType.INT8: return this.fixed(1, (d) => d.setInt8(0, Number(v)));
      case GgufValueType.UINT16: return this.fixed(2, (d) => d.setUint16(0, Number(v), true));
      case GgufValueType.INT16: return this.fixed(2, (d) => d.setInt16(0, Number(v), true));
      case GgufValueType.UINT32: return this.u32(Number(v));
      case GgufValueType.INT32: return this.i32(Number(v));
      case GgufValueType.FLOAT32: return this.fixed(4, (d) => d.setFloat32(0, Number(v), true));
      case GgufValueType.FLOAT64: return this.fixed(8, (d) => d.setFloat64(0, Number(v), true));
      case GgufValueType.BOOL: return this.fixed(1, (d) => d.setUint8(0, v ? 1 : 0));
      case GgufValueType.UINT64: return this.u64(BigInt(v as bigint));
      case GgufValueType.INT64: return this.fixed(8, (d) => d.setBigInt64(0, BigInt(v as bigint), true));
      case GgufValueType.STRING: return this.string(String(v));
      default: throw new TypeError(`not a scalar GGUF type: ${type}`);
    }
  }
  value(v: GgufValue) {
    this.u32(v.type);
    if (v.type === GgufValueType.ARRAY) {
      this.u32(v.elementType);
      this.u64(v.value.length);
      for (const item of v.value) this.scalar(v.elementType, item);
    } else this.scalar(v.type, v.value);
  }
  pad(alignment: number) {
    const padded = alignUp(this.length, alignment);
    if (padded > this.length) this.push(new Uint8Array(padded - this.length));
  }
  bytes(): Uint8Array {
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const c of this.chunks) out.set(c, at), (at += c.byteLength);
    return out;
  }
}

/**
 * Writes `tensors` with `metadata` to `path` (metadata keys in the given order; tensors laid
 * out in order, each at a multiple of `general.alignment`, which is taken from the metadata
 * when present and written there when it is not the default).
 * @throws RangeError when a tensor's data is not the size its type and dimensions give.
 */
export async function writeGguf(path: string, metadata: ReadonlyMap<string, GgufValue>, tensors: readonly GgufTensorPlan[]): Promise<GgufWriteSummary> {
  const alignmentValue = metadata.get('general.alignment');
  const alignment = alignmentValue?.type === GgufValueType.UINT32 ? alignmentValue.value : GGUF_DEFAULT_ALIGNMENT;
  if (!Number.isInteger(alignment) || alignment <= 0 || alignment % 8 !== 0) throw new RangeError(`general.alignment must be a positive multiple of 8, got ${alignment}`);
  const names = new Set<string>();
  const header = new ByteWriter();
  header.u32(GGUF_MAGIC);
  header.u32(GGUF_VERSION);
  header.u64(tensors.length);
  header.u64(metadata.size);
  for (const [key, value] of metadata) {
    header.string(key);
    header.value(value);
  }
  let offset = 0;
  const layout = tensors.map((t) => {
    if (names.has(t.name)) throw new RangeError(`tensor '${t.name}' is planned twice`);
    names.add(t.name);
    const bytes = ggmlTensorBytes(t.type, t.ne);
    const entry = { name: t.name, type: t.type, ne: t.ne, offset, bytes };
    offset = alignUp(offset + bytes, alignment);
    header.string(t.name);
    header.u32(t.ne.length);
    for (const n of t.ne) header.u64(n);
    header.u32(t.type);
    header.u64(entry.offset);
    return entry;
  });
  header.pad(alignment);
  const dataOffset = header.length;

  const temporary = `${path}.partial-${process.pid}`;
  const file = await open(temporary, 'w');
  try {
    await file.write(header.bytes());
    let position = dataOffset;
    for (const [i, plan] of tensors.entries()) {
      const entry = layout[i];
      const data = await plan.data();
      if (data.byteLength !== entry.bytes) {
        throw new RangeError(`tensor '${plan.name}': ${data.byteLength} bytes, but ${GgmlType[plan.type]} [${plan.ne.join(', ')}] is ${entry.bytes}`);
      }
      await file.write(data, 0, data.byteLength, position);
      position += data.byteLength;
      // Padding after every tensor, the last included (as ggml's gguf writer does).
      const next = dataOffset + alignUp(entry.offset + entry.bytes, alignment);
      if (next > position) await file.write(new Uint8Array(next - position), 0, next - position, position);
      position = next;
    }
    await file.close();
    await rename(temporary, path);
    return { path, bytes: position, dataOffset, tensors: layout };
  } catch (error) {
    await file.close().catch(() => {});
    await rm(temporary, { force: true });
    throw error;
  }
}
