/**
 * A minimal protocol-buffers encoder: just enough wire format (varint, fixed32,
 * length-delimited) to serialize the ONNX messages the shard graph builder writes.
 * Chunks are collected and joined once, so large raw tensors are copied only at the end.
 */
export class ProtobufWriter {
  private readonly chunks: Uint8Array[] = [];
  private scratch: number[] = [];
  private length = 0;

  private flushScratch(): void {
    if (this.scratch.length === 0) return;
    this.chunks.push(Uint8Array.from(this.scratch));
    this.length += this.scratch.length;
    this.scratch = [];
  }

  private varint(value: number | bigint): void {
    let v = BigInt.asUintN(64, BigInt(value));
    while (v >= 0x80n) {
      this.scratch.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.scratch.push(Number(v));
  }

  private tag(field: number, wireType: 0 | 2 | 5): void {
    this.varint((field << 3) | wireType);
  }

  /** int32 / int64 / enum / bool field (varint). Negative values use 10 bytes, as protobuf does. */
  int(field: number, value: number | bigint): this {
    this.tag(field, 0);
    this.varint(value);
    return this;
  }

  float(field: number, value: number): this {
    this.tag(field, 5);
    const bytes = new Uint8Array(4);
    new DataView(bytes.buffer).setFloat32(0, value, true);
    this.scratch.push(...bytes);
    return this;
  }

  bytes(field: number, value: Uint8Array): this {
    this.tag(field, 2);
    this.varint(value.length);
    this.flushScratch();
    this.chunks.push(value);
    this.length += value.length;
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, new TextEncoder().encode(value));
  }

  /** Embedded message field. */
  message(field: number, build: (w: ProtobufWriter) => void): this {
    const inner = new ProtobufWriter();
    build(inner);
    return this.bytes(field, inner.finish());
  }

  finish(): Uint8Array {
    this.flushScratch();
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const chunk of this.chunks) {
      out.set(chunk, at);
      at += chunk.length;
    }
    return out;
  }
}
