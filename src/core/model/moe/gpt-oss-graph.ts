/**
 * gpt-oss in the shard graph:
 * - attention extras: the per-head sink logits as GroupQueryAttention's `head_sink` input
 *   (softmax over [scores, sink], the sink dropped) and o_proj's bias; the sliding layers'
 *   window is ModelConfig's `slidingWindow` / `slidingLayers` (gpt-oss-config.ts), which
 *   layer-attention.ts turns into `local_window_size` as for every architecture;
 * - the MoE block, routed as moe-graph.ts does (per expert: NonZero → Gather rows → expert →
 *   ScatterND), with gpt-oss's router and experts: logits = x Wᵀ + b, top k of the logits,
 *   softmax over those k; gate_up = x W_gu + b_gu with gate and up interleaved (even, odd
 *   columns), gate = min(gate, limit), up = clip(up, ±limit), (up + 1) · gate · σ(α · gate),
 *   then down + b_down.
 */
import type { GraphBuilder } from '../onnx/graph-builder.ts';
import { emitLinear } from '../onnx/linear-ops.ts';
import { OnnxType, type OnnxTypeCode } from '../onnx/onnx-model.ts';
import type { ActivationDtype } from '../activations.ts';
import { float32ToFloat16Bytes } from '../dtype.ts';
import type { ModelConfig } from '../types.ts';
import type { GraphWeights } from '../weight-plan.ts';
import { gptOssLayerNames } from './gpt-oss-names.ts';
import { expertFloat, expertMxfp4 } from './gpt-oss-weights.ts';

const typeOf = (dtype: ActivationDtype): OnnxTypeCode => (dtype === 'fp16' ? OnnxType.FLOAT16 : OnnxType.FLOAT);

/** What layer `layer`'s attention adds for gpt-oss (nothing for other architectures). */
export function gptOssAttention(g: GraphBuilder, config: ModelConfig, layer: number, weights: GraphWeights): { sinks?: string; oBias?: string } {
  const names = gptOssLayerNames(config, layer);
  if (!names) return {};
  return { sinks: g.initializer(weights.tensor(names.sinks)), oBias: names.oBias };
}

/** A scalar constant of the activation dtype, named for its layer. */
function scalar(g: GraphBuilder, name: string, value: number, dtype: ActivationDtype): string {
  const raw = dtype === 'fp16' ? float32ToFloat16Bytes([value]) : new Uint8Array(new Float32Array([value]).buffer);
  return g.initializer({ name, type: typeOf(dtype), dims: [], raw });
}

/** gpt-oss's MoE block over `x` ([..., H]); its output in `x`'s shape. */
export function emitGptOssMoe(g: GraphBuilder, x: string, config: ModelConfig, layer: number, dtype: ActivationDtype, weights: GraphWeights): string {
  const names = gptOssLayerNames(config, layer)!;
  const moe = config.moe!;
  const gptOss = moe.gptOss!;
  const H = config.hiddenSize;
  const I = moe.expertIntermediateSize;
  const t = typeOf(dtype);
  const shape = g.op1('Shape', [x]);
  const tokens = g.op1('Reshape', [x, g.int64([-1, H])]); // [T, H]
  const zero = (type: OnnxTypeCode) => ({ tensor: { name: `zero_${type}`, type, dims: [1], raw: new Uint8Array(type === OnnxType.FLOAT16 ? 2 : 4) } });

  let logits = g.op1('Gemm', [tokens, g.initializer(weights.tensor(names.router)), g.initializer(weights.tensor(names.routerBias))], { transB: 1 }); // [T, E]
  if (t !== OnnxType.FLOAT) logits = g.op1('Cast', [logits], { to: OnnxType.FLOAT });
  const [top, chosen] = g.op('TopK', [logits, g.int64([moe.topK])], { axis: -1, largest: 1, sorted: 1 }, { outputs: 2, label: `l${layer}_router` });
  const routed = g.op1('ScatterElements', [g.op1('ConstantOfShape', [g.op1('Shape', [logits])], { value: zero(OnnxType.FLOAT) }), chosen, g.op1('Softmax', [top], { axis: -1 })], { axis: 1 }); // [T, E]
  const routing = t === OnnxType.FLOAT ? routed : g.op1('Cast', [routed], { to: t });

  const limit = scalar(g, `l${layer}_swiglu_limit`, gptOss.swigluLimit, dtype);
  const negLimit = scalar(g, `l${layer}_swiglu_neg_limit`, -gptOss.swigluLimit, dtype);
  const alpha = scalar(g, `l${layer}_swiglu_alpha`, gptOss.alpha, dtype);
  const one = scalar(g, `l${layer}_one`, 1, dtype);
  const expertLinear = (xs: string, base: string, bias: string, e: number): string => {
    const b = g.initializer(expertFloat(weights.packing, bias, e, 'activation').weight);
    if (gptOss.mxfp4) return emitLinear(g, xs, expertMxfp4(weights.packing, base, e), b);
    const w = expertFloat(weights.packing, base, e, 'weight');
    const matrix = w.castTo === undefined ? g.initializer(w.weight) : g.op1('Cast', [g.initializer(w.weight)], { to: w.castTo });
    return g.op1('Gemm', [xs, matrix, b]); // [in, out]: no transposition
  };

  const zeros = g.op1('ConstantOfShape', [g.op1('Shape', [tokens])], { value: zero(t) }); // [T, H]
  let out: string | undefined;
  for (let e = 0; e < moe.numExperts; e++) {
    const column = g.int64([e], []);
    const rows = g.op1('Reshape', [g.op1('NonZero', [g.op1('Gather', [routed, column], { axis: 1 })]), g.int64([-1])]); // [n]
    const picked = g.op1('Gather', [tokens, rows], { axis: 0 }); // [n, H]
    const gateUp = expertLinear(picked, names.gateUp, names.gateUpBias, e); // [n, 2I], interleaved
    const gate = g.op1('Min', [g.op1('Slice', [gateUp, g.int64([0]), g.int64([2 * I]), g.int64([-1]), g.int64([2])]), limit]);
    const up = g.op1('Clip', [g.op1('Slice', [gateUp, g.int64([1]), g.int64([2 * I]), g.int64([-1]), g.int64([2])]), negLimit, limit]);
    const glu = g.op1('Mul', [gate, g.op1('Sigmoid', [g.op1('Mul', [gate, alpha])])]);
    const y = expertLinear(g.op1('Mul', [g.op1('Add', [up, one]), glu]), names.down, names.downBias, e); // [n, H]
    const scale = g.op1('Unsqueeze', [g.op1('Gather', [g.op1('Gather', [routing, column], { axis: 1 }), rows], { axis: 0 }), g.int64([1])]); // [n, 1]
    const part = g.op1('ScatterND', [zeros, g.op1('Unsqueeze', [rows, g.int64([1])]), g.op1('Mul', [y, scale])]);
    out = out === undefined ? part : g.op1('Add', [out, part]);
  }
  return g.op1('Reshape', [out!, shape]);
}
