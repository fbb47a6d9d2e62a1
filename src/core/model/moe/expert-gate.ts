/**
 * Experts behind If nodes: each expert's nodes (pick its rows, its linears, scatter back) sit
 * in the `then` branch of one If whose condition is "some token chose this expert", so an
 * expert no token chose costs two node runs (the Gather of its flag and the If) instead of
 * its whole chain on zero rows. The branches read the outer graph's values by name; the
 * experts' weights stay initializers of the outermost graph (onnxruntime prepacks them once).
 *
 *   used  = ReduceMax(routed [T, E], axis 0) > 0           [E] bool
 *   acc_e = If(used[e], then: acc_{e−1} + part_e, else: acc_{e−1})
 */
import type { GraphBuilder } from '../onnx/graph-builder.ts';
import { OnnxType, type OnnxTypeCode } from '../onnx/onnx-model.ts';

/** [E] bool: whether any token routed to each expert (`routed` is the float32 [T, E] routing table). */
export function expertsUsed(g: GraphBuilder, routed: string): string {
  const zero = g.float([0], OnnxType.FLOAT, []);
  return g.op1('Greater', [g.op1('ReduceMax', [routed, g.int64([0])], { keepdims: 0 }), zero]);
}

/**
 * `acc` ([T, hidden] of `type`) plus expert `e`'s part when some token chose it, else `acc`
 * unchanged. `part` builds the expert's nodes on the `then` branch and returns its [T, hidden].
 */
export function addIfUsed(g: GraphBuilder, used: string, e: number, acc: string, type: OnnxTypeCode, hidden: number, label: string, part: (branch: GraphBuilder) => string): string {
  const then = g.branch(`${label}_then`);
  const sum = then.op1('Add', [acc, part(then)], {}, { output: `${label}_then_out` });
  then.output(sum, type, ['tokens', hidden]);
  const otherwise = g.branch(`${label}_else`);
  const same = otherwise.op1('Identity', [acc], {}, { output: `${label}_else_out` });
  otherwise.output(same, type, ['tokens', hidden]);
  const flag = g.op1('Gather', [used, g.int64([e], [])], { axis: 0 });
  return g.op1('If', [flag], { then_branch: { graph: then.build() }, else_branch: { graph: otherwise.build() } }, { label });
}
