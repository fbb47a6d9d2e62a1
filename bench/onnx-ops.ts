/**
 * The operators of an ONNX model file, counted by type: a minimal reader of the protobuf
 * wire format for ModelProto.graph (field 7) → GraphProto.node (field 1) → NodeProto.op_type
 * (field 4) and domain (field 7). Enough to count what onnxruntime's optimizer left in a
 * model it wrote (`optimizedModelFilePath`); not a general ONNX reader.
 */

interface Field {
  readonly number: number;
  readonly wire: number;
  readonly bytes?: Uint8Array;
}

function* fields(buffer: Uint8Array): Generator<Field> {
  let at = 0;
  const varint = (): number => {
    let result = 0;
    let scale = 1;
    for (;;) {
      if (at >= buffer.length) throw new RangeError('truncated varint');
      const byte = buffer[at++]!;
      result += (byte & 0x7f) * scale;
      if ((byte & 0x80) === 0) return result;
      scale *= 128;
    }
  };
  while (at < buffer.length) {
    const key = varint();
    const number = Math.floor(key / 8);
    const wire = key & 7;
    if (wire === 0) varint();
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = varint();
      if (at + length > buffer.length) throw new RangeError('truncated field');
      yield { number, wire, bytes: buffer.subarray(at, at + length) };
      at += length;
      continue;
    } else throw new RangeError(`unsupported wire type ${wire}`);
    yield { number, wire };
  }
}

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/** Op type (with its domain when not the default one, e.g. `com.microsoft.MatMulNBits`) → count. */
export function countOps(model: Uint8Array): Map<string, number> {
  const counts = new Map<string, number>();
  for (const f of fields(model)) {
    if (f.number !== 7 || !f.bytes) continue; // ModelProto.graph
    for (const g of fields(f.bytes)) {
      if (g.number !== 1 || !g.bytes) continue; // GraphProto.node
      let op = '';
      let domain = '';
      for (const n of fields(g.bytes)) {
        if (n.number === 4 && n.bytes) op = text(n.bytes);
        else if (n.number === 7 && n.bytes) domain = text(n.bytes);
      }
      const name = domain && domain !== 'ai.onnx' ? `${domain}.${op}` : op;
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
  }
  return counts;
}
