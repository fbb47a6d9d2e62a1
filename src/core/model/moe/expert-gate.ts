/**
 * Experts behind a tree of If nodes: each expert's nodes (pick its rows, its linears, scatter
 * back) sit in the `then` branch of an If, and the Ifs form a binary tree over the expert ids
 * whose every If asks "did some token choose an expert of my range?". A decode step runs the
 * chains of its k experts and the Ifs on their paths and their siblings' (at most 2·k·⌈log2 E⌉),
 * not one If per expert (an If costs onnxruntime ~30 µs: at 64 experts the per-expert Ifs were
 * a decode step's main overhead). The branches read the outer graph's values by name; the
 * experts' weights stay initializers of the outermost graph (onnxruntime prepacks them once).
 *
 *   used   = ReduceMax(routed [T, E], axis 0)                  [E] ≥ 0, > 0 where chosen
 *   flags  = used · M > 0                                      [nodes] bool, M[e, n] = e ∈ range(n)
 *   node n = If(flags[n], then: its children (a leaf: acc + part_e), else: acc)
 */
import type { GraphBuilder } from '../onnx/graph-builder.ts';
import { OnnxType, type OnnxTypeCode } from '../onnx/onnx-model.ts';

/** The tree's ranges [lo, hi) in preorder: the root, then each half in turn. */
function treeRanges(numExperts: number): [number, number][] {
  const out: [number, number][] = [];
  const visit = (lo: number, hi: number) => {
    out.push([lo, hi]);
    if (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      visit(lo, mid);
      visit(mid, hi);
    }
  };
  visit(0, numExperts);
  return out;
}

/**
 * `acc` ([T, hidden] of `type`) plus the part of every expert some token chose (`routed` is
 * the float32 [T, E] routing table, 0 where not routed). `part` builds expert `e`'s nodes on
 * the branch it is given and returns its [T, hidden].
 */
export function addChosenExperts(g: GraphBuilder, routed: string, numExperts: number, acc: string, type: OnnxTypeCode, hidden: number, label: string, part: (branch: GraphBuilder, e: number) => string): string {
  const ranges = treeRanges(numExperts);
  const index = new Map(ranges.map(([lo, hi], n) => [`${lo}:${hi}`, n]));
  const membership = new Array<number>(numExperts * ranges.length).fill(0);
  ranges.forEach(([lo, hi], n) => {
    for (let e = lo; e < hi; e++) membership[e * ranges.length + n] = 1;
  });
  const used = g.op1('Unsqueeze', [g.op1('ReduceMax', [routed, g.int64([0])], { keepdims: 0 }), g.int64([0])]); // [1, E]
  const sums = g.op1('MatMul', [used, g.float(membership, OnnxType.FLOAT, [numExperts, ranges.length])]); // [1, nodes]
  const flags = g.op1('Greater', [g.op1('Reshape', [sums, g.int64([-1])]), g.float([0], OnnxType.FLOAT, [])]); // [nodes] bool

  const node = (b: GraphBuilder, lo: number, hi: number, into: string): string => {
    const n = index.get(`${lo}:${hi}`)!;
    const name = `${label}_n${lo}_${hi}`;
    const then = b.branch(`${name}_then`);
    let sum: string;
    if (hi - lo === 1) sum = then.op1('Add', [into, part(then, lo)]);
    else {
      const mid = (lo + hi) >> 1;
      sum = node(then, mid, hi, node(then, lo, mid, into));
    }
    then.output(sum, type, ['tokens', hidden]);
    const otherwise = b.branch(`${name}_else`);
    otherwise.output(otherwise.op1('Identity', [into]), type, ['tokens', hidden]);
    const flag = b.op1('Gather', [flags, b.int64([n], [])], { axis: 0 });
    return b.op1('If', [flag], { then_branch: { graph: then.build() }, else_branch: { graph: otherwise.build() } }, { label: name });
  };
  if (numExperts === 1) return node(g, 0, 1, acc);
  const mid = numExperts >> 1; // the root's flag is always true (every token chose some expert)
  return node(g, mid, numExperts, node(g, 0, mid, acc));
}
