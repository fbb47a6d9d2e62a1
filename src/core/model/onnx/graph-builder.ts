/**
 * Incremental builder for an OnnxGraph: each `op` call appends a node and returns its
 * output names, so graph code reads like the forward pass it describes.
 */
import type {
  AttributeValue,
  Initializer,
  OnnxGraph,
  OnnxNode,
  OnnxTypeCode,
  ValueInfo,
} from './onnx-model.ts';
import { OnnxType } from './onnx-model.ts';
import { float32ToFloat16Bytes } from '../dtype.ts';

export type Attrs = Record<string, number | readonly number[] | string | AttributeValue>;

function toAttribute(value: number | readonly number[] | string | AttributeValue): AttributeValue {
  if (typeof value === 'number') {
    return Number.isInteger(value) ? { int: value } : { float: value };
  }
  if (typeof value === 'string') return { string: value };
  if (Array.isArray(value)) return { ints: value as readonly number[] };
  return value as AttributeValue;
}

/** What a graph and its subgraphs share: node ids, the constants and the initializers (all in the outermost graph). */
interface Scope {
  counter: number;
  readonly constants: Map<string, string>;
  readonly initializers: Initializer[];
}

export class GraphBuilder {
  private readonly nodes: OnnxNode[] = [];
  private readonly inputs: ValueInfo[] = [];
  private readonly outputs: ValueInfo[] = [];
  private readonly scope: Scope;
  private readonly isBranch: boolean;

  constructor(
    private readonly name: string,
    parent?: GraphBuilder,
  ) {
    this.scope = parent ? parent.scope : { counter: 0, constants: new Map(), initializers: [] };
    this.isBranch = parent !== undefined;
  }

  /**
   * A subgraph (an If branch, a Loop body) that reads this graph's values by name: its node
   * names stay unique across the model, and its initializers and constants live in the
   * outermost graph (so a weight a branch uses is prepacked once, like any other).
   */
  branch(name: string): GraphBuilder {
    return new GraphBuilder(name, this);
  }

  private get initializers(): Initializer[] {
    return this.scope.initializers;
  }

  private get constants(): Map<string, string> {
    return this.scope.constants;
  }

  input(name: string, type: OnnxTypeCode, shape: readonly (number | string)[]): string {
    this.inputs.push({ name, type, shape });
    return name;
  }

  output(name: string, type: OnnxTypeCode, shape: readonly (number | string)[]): void {
    this.outputs.push({ name, type, shape });
  }

  initializer(init: Initializer): string {
    this.initializers.push(init);
    return init.name;
  }

  /** A small inline int32 constant, shared between uses. */
  int32(values: readonly number[], dims: readonly number[] = [values.length]): string {
    const key = `i32:${dims.join('x')}:${values.join(',')}`;
    const existing = this.constants.get(key);
    if (existing) return existing;
    const raw = new Uint8Array(new Int32Array(values).buffer);
    const name = `const_${this.constants.size}`;
    this.initializer({ name, type: OnnxType.INT32, dims, raw });
    this.constants.set(key, name);
    return name;
  }

  /** A small inline int64 constant (shapes, axes), shared between uses. */
  int64(values: readonly number[], dims: readonly number[] = [values.length]): string {
    const key = `i64:${dims.join('x')}:${values.join(',')}`;
    const existing = this.constants.get(key);
    if (existing) return existing;
    const raw = new Uint8Array(values.length * 8);
    const view = new DataView(raw.buffer);
    values.forEach((v, i) => view.setBigInt64(i * 8, BigInt(v), true));
    const name = `const_${this.constants.size}`;
    this.initializer({ name, type: OnnxType.INT64, dims, raw });
    this.constants.set(key, name);
    return name;
  }

  /** A small inline float constant (float32 or float16), shared between uses. */
  float(values: readonly number[], type: OnnxTypeCode, dims: readonly number[] = [values.length]): string {
    const key = `f${type}:${dims.join('x')}:${values.join(',')}`;
    const existing = this.constants.get(key);
    if (existing) return existing;
    const raw = type === OnnxType.FLOAT16 ? float32ToFloat16Bytes(values) : new Uint8Array(new Float32Array(values).buffer);
    const name = `const_${this.constants.size}`;
    this.initializer({ name, type, dims, raw });
    this.constants.set(key, name);
    return name;
  }

  /**
   * Append a node. `outputs` is a count (names generated from `label`) or explicit names.
   * Returns the output names.
   */
  op(
    opType: string,
    inputs: readonly string[],
    attrs: Attrs = {},
    options: { domain?: string; outputs?: number | readonly string[]; label?: string } = {},
  ): string[] {
    const id = this.scope.counter++;
    const label = options.label ?? opType;
    const outs = options.outputs ?? 1;
    const outputs =
      typeof outs === 'number' ? Array.from({ length: outs }, (_, i) => `${label}_${id}_${i}`) : [...outs];
    const attributes: Record<string, AttributeValue> = {};
    for (const [k, v] of Object.entries(attrs)) attributes[k] = toAttribute(v);
    this.nodes.push({ opType, domain: options.domain ?? '', name: `${label}_${id}`, inputs, outputs, attributes });
    return outputs;
  }

  /** Single-output convenience around `op`. */
  op1(opType: string, inputs: readonly string[], attrs: Attrs = {}, options: { domain?: string; label?: string; output?: string } = {}): string {
    return this.op(opType, inputs, attrs, { ...options, outputs: options.output ? [options.output] : 1 })[0];
  }

  build(): OnnxGraph {
    return {
      name: this.name,
      nodes: this.nodes,
      initializers: this.isBranch ? [] : this.initializers,
      inputs: this.inputs,
      outputs: this.outputs,
    };
  }
}
