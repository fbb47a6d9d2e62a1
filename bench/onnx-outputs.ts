/**
 * Dropping graph outputs from a serialized ONNX model (ModelProto field 7 = graph,
 * GraphProto field 12 = output, ValueInfoProto field 1 = name), every other byte kept as it
 * is. onnxruntime keeps a graph output's buffer until the run ends whether it is fetched or
 * not; a node output no graph output names is freed after its last consumer (or at once).
 * A KV pool fetches none of `present.*` (GroupQueryAttention's present is as large as the
 * pool's capacity): without them as outputs, one layer's present is alive at a time, not all.
 */

/** Wire types of protobuf fields. */
const VARINT = 0;
const FIXED64 = 1;
const BYTES = 2;
const FIXED32 = 5;

const MODEL_GRAPH = 7;
const GRAPH_OUTPUT = 12;
const VALUE_INFO_NAME = 1;

export class OnnxRewriteError extends Error {
  override readonly name = 'OnnxRewriteError';
}

interface Field {
  readonly number: number;
  readonly wire: number;
  /** The field's bytes, key included. */
  readonly start: number;
  readonly end: number;
  /** A length-delimited field's payload. */
  readonly payload?: { readonly start: number; readonly end: number };
}

function readVarint(bytes: Uint8Array, at: number): { value: number; next: number } {
  let value = 0;
  let scale = 1;
  for (let i = at; i < bytes.length && i < at + 10; i++) {
    const b = bytes[i]!;
    value += (b & 0x7f) * scale;
    if ((b & 0x80) === 0) return { value, next: i + 1 };
    scale *= 128;
  }
  throw new OnnxRewriteError(`malformed varint at byte ${at}`);
}

function* fields(bytes: Uint8Array, start: number, end: number): Generator<Field> {
  let at = start;
  while (at < end) {
    const key = readVarint(bytes, at);
    const number = Math.floor(key.value / 8);
    const wire = key.value % 8;
    let next: number;
    let payload: Field['payload'];
    if (wire === VARINT) next = readVarint(bytes, key.next).next;
    else if (wire === FIXED64) next = key.next + 8;
    else if (wire === FIXED32) next = key.next + 4;
    else if (wire === BYTES) {
      const length = readVarint(bytes, key.next);
      payload = { start: length.next, end: length.next + length.value };
      next = payload.end;
    } else throw new OnnxRewriteError(`unsupported protobuf wire type ${wire} at byte ${at}`);
    if (next > end) throw new OnnxRewriteError(`field ${number} at byte ${at} runs past its message`);
    yield { number, wire, start: at, end: next, ...(payload ? { payload } : {}) };
    at = next;
  }
}

function varint(value: number): number[] {
  const out: number[] = [];
  while (value >= 0x80) {
    out.push((value % 128) | 0x80);
    value = Math.floor(value / 128);
  }
  out.push(value);
  return out;
}

function valueInfoName(bytes: Uint8Array, payload: { start: number; end: number }): string | undefined {
  for (const f of fields(bytes, payload.start, payload.end)) {
    if (f.number === VALUE_INFO_NAME && f.payload) return new TextDecoder().decode(bytes.subarray(f.payload.start, f.payload.end));
  }
  return undefined;
}

/**
 * `model` without the graph outputs `drop` selects (the nodes computing them stay), or
 * `model` itself when it selects none. Throws OnnxRewriteError on bytes that are not a
 * ModelProto with one graph.
 */
export function withoutGraphOutputs(model: Uint8Array, drop: (name: string) => boolean): Uint8Array {
  const top = [...fields(model, 0, model.length)];
  const graphs = top.filter((f) => f.number === MODEL_GRAPH && f.wire === BYTES);
  if (graphs.length !== 1) throw new OnnxRewriteError(`a model holds one graph (found ${graphs.length})`);
  const graph = graphs[0]!;
  const kept: Field[] = [];
  let dropped = 0;
  for (const f of fields(model, graph.payload!.start, graph.payload!.end)) {
    if (f.number === GRAPH_OUTPUT && f.payload) {
      const name = valueInfoName(model, f.payload);
      if (name !== undefined && drop(name)) {
        dropped++;
        continue;
      }
    }
    kept.push(f);
  }
  if (dropped === 0) return model;
  const graphLength = kept.reduce((n, f) => n + f.end - f.start, 0);
  const graphHeader = [...varint(MODEL_GRAPH * 8 + BYTES), ...varint(graphLength)];
  const otherLength = top.reduce((n, f) => (f === graph ? n : n + f.end - f.start), 0);
  const out = new Uint8Array(otherLength + graphHeader.length + graphLength);
  let at = 0;
  const copy = (f: Field) => {
    out.set(model.subarray(f.start, f.end), at);
    at += f.end - f.start;
  };
  for (const f of top) {
    if (f !== graph) {
      copy(f);
      continue;
    }
    out.set(graphHeader, at);
    at += graphHeader.length;
    for (const k of kept) copy(k);
  }
  return out;
}
