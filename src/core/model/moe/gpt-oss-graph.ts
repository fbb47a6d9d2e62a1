/**
 * gpt-oss in the shard graph:
 * - attention extras: the per-head sink logits as GroupQueryAttention's `head_sink` input
 *   (softmax over [scores, sink], the sink dropped) and o_proj's bias; the sliding layers'
 *   window is ModelConfig's `slidingWindow` / `slidingLayers` (gpt-oss-config.ts), which
 *   layer-attention.ts turns into `local_window_size` as for every architecture;
 * - the MoE block, routed as moe-graph.ts does (per chosen expert, behind its If: NonZero →
 *   Gather rows → expert → ScatterND), with gpt-oss's router and experts: logits = x Wᵀ + b, top k of the logits,
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
import { addIfUsed, expertsUsed } from './expert-gate.ts';

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
  const expertLinear = (b: GraphBuilder, xs: string, base: string, bias: string, e: number): string => {
    const bi = b.initializer(expertFloat(weights.packing, bias, e, 'activation').weight);
    if (gptOss.mxfp4) return emitLinear(b, xs, expertMxfp4(weights.packing, base, e), bi);
    const w = expertFloat(weights.packing, base, e, 'weight');
    const matrix = w.castTo === undefined ? b.initializer(w.weight) : b.op1('Cast', [b.initializer(w.weight)], { to: w.castTo });
    return b.op1('Gemm', [xs, matrix, bi]); // [in, out]: no transposition
  };

  const zeros = g.op1('ConstantOfShape', [g.op1('Shape', [tokens])], { value: zero(t) }); // [T, H]
  const used = expertsUsed(g, routed);
  let out = zeros;
  for (let e = 0; e < moe.numExperts; e++) {
    out = addIfUsed(g, used, e, out, t, H, `l${layer}_e${e}`, (b) => {
      const column = b.int64([e], []);
      const rows = b.op1('Reshape', [b.op1('NonZero', [b.op1('Gather', [routed, column], { axis: 1 })]), b.int64([-1])]); // [n]
      const picked = b.op1('Gather', [tokens, rows], { axis: 0 }); // [n, H]
      const gateUp = expertLinear(b, picked, names.gateUp, names.gateUpBias, e); // [n, 2I], interleaved
      const gate = b.op1('Min', [b.op1('Slice', [gateUp, b.int64([0]), b.int64([2 * I]), b.int64([-1]), b.int64([2])]), limit]);
      const up = b.op1('Clip', [b.op1('Slice', [gateUp, b.int64([1]), b.int64([2 * I]), b.int64([-1]), b.int64([2])]), negLimit, limit]);
      const glu = b.op1('Mul', [gate, b.op1('Sigmoid', [b.op1('Mul', [gate, alpha])])]);
      const y = expertLinear(b, b.op1('Mul', [b.op1('Add', [up, one]), glu]), names.down, names.downBias, e); // [n, H]
      const scale = b.op1('Unsqueeze', [b.op1('Gather', [b.op1('Gather', [routing, column], { axis: 1 }), rows], { axis: 0 }), b.int64([1])]); // [n, 1]
      return b.op1('ScatterND', [zeros, b.op1('Unsqueeze', [rows, b.int64([1])]), b.op1('Mul', [y, scale])]);
    });
  }
  return g.op1('Reshape', [out, shape]);
}
