/**
 * The sparse MoE block of one decoder layer as plain ONNX operators, so every runtime runs
 * it the same way (onnxruntime-node CPU, onnxruntime-web wasm and WebGPU):
 *
 *   x        [T, H]  the post-attention-normed tokens, T = B·seq (a batched stream is flattened)
 *   probs    = Softmax(x Wrᵀ) in float32 (Hugging Face's `softmax(..., dtype=float)`)
 *   w, idx   = TopK(probs, k); w /= Σw when renormalized
 *   dense    = ScatterElements(0 [T, E], idx, w)            the routing weight of every (token, expert)
 *   for each expert e some token chose (an If per expert, expert-gate.ts):
 *     rows   = NonZero(dense[:, e])                         the tokens routed to e
 *     y_e    = down_e(silu(gate_e(x[rows])) · up_e(x[rows])) · dense[rows, e]
 *     out   += ScatterND(0 [T, H], rows, y_e)
 *   out     += sigmoid(x Wsgᵀ) · shared(x)                  (Qwen2-MoE's shared expert)
 *
 * An expert no token chose skips its branch (two node runs: its flag and the If): its weights
 * are not read, so a decode step reads only its chosen experts' bytes and runs only their
 * nodes, and each entry of a batch is routed by its own row.
 * A prefill reads each chosen expert once for all the tokens routed to it (no copy of the
 * weights per token). Expert linears are whatever the weight format gives (Gemm over float,
 * MatMulNBits over q8/q4, with gate and up as one MatMulNBits); the router and the shared
 * expert's gate stay in the activation dtype.
 */
import type { GraphBuilder } from '../onnx/graph-builder.ts';
import { emitLinear } from '../onnx/linear-ops.ts';
import { OnnxType, type OnnxTypeCode } from '../onnx/onnx-model.ts';
import type { ActivationDtype } from '../activations.ts';
import type { ModelConfig } from '../types.ts';
import type { GraphWeights } from '../weight-plan.ts';
import { moeLayerNames, type MlpNames, type MoeLayerNames } from './moe-names.ts';
import { isSparseLayer } from './moe-config.ts';
import { emitGptOssMoe } from './gpt-oss-graph.ts';
import { addIfUsed, expertsUsed } from './expert-gate.ts';

const typeOf = (dtype: ActivationDtype) => (dtype === 'fp16' ? OnnxType.FLOAT16 : OnnxType.FLOAT);

/**
 * The sparse MLP of layer `layer` over `x` when it has one (Mixtral/Qwen MoE here, gpt-oss in
 * gpt-oss-graph.ts), or undefined for a dense layer.
 */
export function emitSparseMlp(g: GraphBuilder, x: string, config: ModelConfig, layer: number, dtype: ActivationDtype, weights: GraphWeights): string | undefined {
  if (!isSparseLayer(config.moe, layer)) return undefined;
  if (config.moe.family === 'gpt-oss') return emitGptOssMoe(g, x, config, layer, dtype, weights);
  return emitMoeBlock(g, x, config, layer, moeLayerNames(config, layer)!, dtype, weights);
}

/** SwiGLU MLP over 2-D `x` [n, H]: down(silu(gate(x)) · up(x)). */
export function emitSwiGlu(g: GraphBuilder, x: string, names: MlpNames, weights: GraphWeights, label: string): string {
  const fused = weights.linearGroup([names.gate, names.up]);
  let gate: string;
  let up: string;
  if (fused) [gate, up] = g.op('Split', [emitLinear(g, x, fused.weight), g.int64(fused.sizes)], { axis: -1 }, { outputs: 2, label });
  else [gate, up] = [emitLinear(g, x, weights.linear(names.gate)), emitLinear(g, x, weights.linear(names.up))];
  const silu = g.op1('Mul', [gate, g.op1('Sigmoid', [gate])]);
  return emitLinear(g, g.op1('Mul', [silu, up]), weights.linear(names.down));
}

/**
 * Appends the MoE block over `x` (any shape [..., H]); returns its output in `x`'s shape,
 * to be added to the residual stream.
 */
export function emitMoeBlock(g: GraphBuilder, x: string, config: ModelConfig, layer: number, names: MoeLayerNames, dtype: ActivationDtype, weights: GraphWeights): string {
  const moe = config.moe!;
  const H = config.hiddenSize;
  const t = typeOf(dtype);
  const shape = g.op1('Shape', [x]);
  const tokens = g.op1('Reshape', [x, g.int64([-1, H])]); // [T, H]
  const zero = (type: OnnxTypeCode) => ({ tensor: { name: `zero_${type}`, type, dims: [1], raw: new Uint8Array(type === OnnxType.FLOAT16 ? 2 : 4) } });

  // Routing in float32.
  let logits = g.op1('Gemm', [tokens, g.initializer(weights.tensor(names.router))], { transB: 1 }); // [T, E]
  if (t !== OnnxType.FLOAT) logits = g.op1('Cast', [logits], { to: OnnxType.FLOAT });
  const probs = g.op1('Softmax', [logits], { axis: -1 });
  let [top, chosen] = g.op('TopK', [probs, g.int64([moe.topK])], { axis: -1, largest: 1, sorted: 1 }, { outputs: 2, label: `l${layer}_router` });
  if (moe.normTopK) top = g.op1('Div', [top, g.op1('ReduceSum', [top, g.int64([-1])], { keepdims: 1 })]);
  const routed = g.op1('ScatterElements', [g.op1('ConstantOfShape', [g.op1('Shape', [probs])], { value: zero(OnnxType.FLOAT) }), chosen, top], { axis: 1 }); // [T, E]
  const routing = t === OnnxType.FLOAT ? routed : g.op1('Cast', [routed], { to: t });

  const zeros = g.op1('ConstantOfShape', [g.op1('Shape', [tokens])], { value: zero(t) }); // [T, H]
  const used = expertsUsed(g, routed);
  let out = zeros;
  names.experts.forEach((expert, e) => {
    out = addIfUsed(g, used, e, out, t, H, `l${layer}_e${e}`, (b) => {
      const column = b.int64([e], []);
      const rows = b.op1('Reshape', [b.op1('NonZero', [b.op1('Gather', [routed, column], { axis: 1 })]), b.int64([-1])]); // [n]
      const picked = b.op1('Gather', [tokens, rows], { axis: 0 }); // [n, H]
      const y = emitSwiGlu(b, picked, expert, weights, `l${layer}_e${e}_gate_up`);
      const scale = b.op1('Unsqueeze', [b.op1('Gather', [b.op1('Gather', [routing, column], { axis: 1 }), rows], { axis: 0 }), b.int64([1])]); // [n, 1]
      return b.op1('ScatterND', [zeros, b.op1('Unsqueeze', [rows, b.int64([1])]), b.op1('Mul', [y, scale])]); // [T, H]
    });
  });
  if (names.shared) {
    const shared = emitSwiGlu(g, tokens, names.shared, weights, `l${layer}_shared_gate_up`);
    const gate = g.op1('Sigmoid', [g.op1('Gemm', [tokens, g.initializer(weights.tensor(names.shared.gateWeight))], { transB: 1 })]); // [T, 1]
    out = g.op1('Add', [out, g.op1('Mul', [shared, gate])]);
  }
  return g.op1('Reshape', [out, shape]);
}
