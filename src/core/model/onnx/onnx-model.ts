/**
 * ONNX model description and serializer (ModelProto, protobuf field numbers from onnx.proto3).
 * Only what shard graphs use: nodes, initializers (inline or external), typed inputs/outputs.
 */
import { ProtobufWriter } from './protobuf-writer.ts';

/** TensorProto.DataType codes. */
export const OnnxType = { FLOAT: 1, UINT8: 2, INT32: 6, INT64: 7, FLOAT16: 10, BFLOAT16: 16 } as const;
export type OnnxTypeCode = (typeof OnnxType)[keyof typeof OnnxType];

/** Packed external data places each initializer at a multiple of this many bytes. */
export const ONNX_EXTERNAL_ALIGN = 64;

/** An initializer whose bytes are inline or live in an external file at `offset` (weights in place). */
export interface Initializer {
  readonly name: string;
  readonly type: OnnxTypeCode;
  readonly dims: readonly number[];
  readonly raw?: Uint8Array;
  readonly external?: { readonly location: string; readonly offset: number; readonly length: number };
}

export type AttributeValue =
  | { readonly int: number }
  | { readonly float: number }
  | { readonly ints: readonly number[] }
  | { readonly string: string }
  | { readonly tensor: Initializer }
  | { readonly graph: OnnxGraph }; // a subgraph (Loop's body); it may read the outer graph's values by name

export interface OnnxNode {
  readonly opType: string;
  readonly domain: string; // '' for the default ONNX domain, 'com.microsoft' for contrib ops
  readonly name: string;
  readonly inputs: readonly string[]; // '' marks an omitted optional input
  readonly outputs: readonly string[];
  readonly attributes: Readonly<Record<string, AttributeValue>>;
}

/** A graph input or output: element type and shape (numbers fixed, strings symbolic). */
export interface ValueInfo {
  readonly name: string;
  readonly type: OnnxTypeCode;
  readonly shape: readonly (number | string)[];
}

export interface OnnxGraph {
  readonly name: string;
  readonly nodes: readonly OnnxNode[];
  readonly initializers: readonly Initializer[];
  readonly inputs: readonly ValueInfo[];
  readonly outputs: readonly ValueInfo[];
}

const IR_VERSION = 10;
const ATTR = { FLOAT: 1, INT: 2, STRING: 3, TENSOR: 4, GRAPH: 5, INTS: 7 } as const;

function writeTensor(w: ProtobufWriter, t: Initializer): void {
  for (const d of t.dims) w.int(1, d);
  w.int(2, t.type);
  w.string(8, t.name);
  if (t.external) {
    const entry = (key: string, value: string) =>
      w.message(13, (e) => e.string(1, key).string(2, value));
    entry('location', t.external.location);
    entry('offset', String(t.external.offset));
    entry('length', String(t.external.length));
    w.int(14, 1); // data_location = EXTERNAL
  } else {
    w.bytes(9, t.raw ?? new Uint8Array(0));
  }
}

function writeAttribute(w: ProtobufWriter, name: string, value: AttributeValue): void {
  w.string(1, name);
  if ('int' in value) w.int(3, value.int).int(20, ATTR.INT);
  else if ('float' in value) w.float(2, value.float).int(20, ATTR.FLOAT);
  else if ('ints' in value) {
    for (const v of value.ints) w.int(8, v);
    w.int(20, ATTR.INTS);
  } else if ('string' in value) w.string(4, value.string).int(20, ATTR.STRING);
  else if ('graph' in value) w.message(6, (g) => writeGraph(g, value.graph)).int(20, ATTR.GRAPH);
  else w.message(5, (t) => writeTensor(t, value.tensor)).int(20, ATTR.TENSOR);
}

function writeValueInfo(w: ProtobufWriter, v: ValueInfo): void {
  w.string(1, v.name);
  w.message(2, (type) =>
    type.message(1, (tensor) => {
      tensor.int(1, v.type);
      tensor.message(2, (shape) => {
        for (const d of v.shape) {
          shape.message(1, (dim) => (typeof d === 'number' ? dim.int(1, d) : dim.string(2, d)));
        }
      });
    }),
  );
}

function writeGraph(g: ProtobufWriter, graph: OnnxGraph): void {
  for (const n of graph.nodes) {
    g.message(1, (node) => {
      for (const i of n.inputs) node.string(1, i);
      for (const o of n.outputs) node.string(2, o);
      node.string(3, n.name).string(4, n.opType);
      for (const [k, v] of Object.entries(n.attributes)) node.message(5, (a) => writeAttribute(a, k, v));
      if (n.domain) node.string(7, n.domain);
    });
  }
  g.string(2, graph.name);
  for (const t of graph.initializers) g.message(5, (tw) => writeTensor(tw, t));
  for (const v of graph.inputs) g.message(11, (vw) => writeValueInfo(vw, v));
  for (const v of graph.outputs) g.message(12, (vw) => writeValueInfo(vw, v));
}

/** Serialize a graph as an ONNX ModelProto with the default and com.microsoft opsets. */
export function serializeModel(graph: OnnxGraph, opset = 21): Uint8Array {
  const w = new ProtobufWriter();
  w.int(1, IR_VERSION);
  w.string(2, 'meshnet');
  w.message(7, (g) => writeGraph(g, graph));
  w.message(8, (o) => o.string(1, '').int(2, opset));
  w.message(8, (o) => o.string(1, 'com.microsoft').int(2, 1));
  return w.finish();
}
