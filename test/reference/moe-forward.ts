/**
 * The sparse MoE block of the pure-TypeScript reference, as Hugging Face's Mixtral /
 * Qwen2-MoE / Qwen3-MoE modeling code computes it: softmax of the router logits (float), the
 * top k, renormalized when `norm_topk_prob` (Mixtral always), each chosen expert's SwiGLU
 * output times its weight, summed; Qwen2-MoE adds sigmoid(shared_expert_gate(x)) ·
 * shared_expert(x). Same precision rules as forward.ts (float32 values, float64 sums).
 */
import { moeLayerNames, type MlpNames } from '../../src/core/model/moe/moe-names.ts';
import type { ModelConfig } from '../../src/core/model/types.ts';
import type { ReferenceWeights } from './forward.ts';

/** The chosen experts of one token, best first, with their (renormalized) weights. */
export function referenceRoute(config: ModelConfig, weights: ReferenceWeights, layer: number, x: Float32Array): { experts: number[]; weights: number[] } {
  const moe = config.moe!;
  const names = moeLayerNames(config, layer)!;
  const logits = linear(x, weights.get(names.router), moe.numExperts);
  const max = Math.max(...logits);
  const exp = Array.from(logits, (v) => Math.exp(v - max));
  const sum = exp.reduce((a, b) => a + b, 0);
  const probs = exp.map((v) => Math.fround(v / sum));
  const order = probs.map((_, e) => e).sort((a, b) => probs[b] - probs[a] || a - b).slice(0, moe.topK);
  let chosen = order.map((e) => probs[e]);
  if (moe.normTopK) {
    const total = chosen.reduce((a, b) => a + b, 0);
    chosen = chosen.map((p) => Math.fround(p / total));
  }
  return { experts: order, weights: chosen };
}

/** The MoE block's output `[hidden]` for one normed token, or undefined when `layer` is dense. */
export function referenceMoeBlock(config: ModelConfig, weights: ReferenceWeights, layer: number, x: Float32Array): Float32Array | undefined {
  const names = moeLayerNames(config, layer);
  if (!names || !config.moe) return undefined;
  const hs = config.hiddenSize;
  const out = new Float64Array(hs);
  const route = referenceRoute(config, weights, layer, x);
  weights.onRoute?.(layer, route.experts);
  route.experts.forEach((e, i) => {
    const y = swiGlu(x, weights, names.experts[e], config.moe!.expertIntermediateSize);
    for (let j = 0; j < hs; j++) out[j] += Math.fround(y[j] * route.weights[i]);
  });
  if (names.shared) {
    const y = swiGlu(x, weights, names.shared, config.moe.sharedExpertIntermediateSize!);
    const gate = linear(x, weights.get(names.shared.gateWeight), 1)[0];
    const sigmoid = Math.fround(1 / (1 + Math.exp(-gate)));
    for (let j = 0; j < hs; j++) out[j] += Math.fround(y[j] * sigmoid);
  }
  return Float32Array.from(out);
}

/** down(silu(gate(x)) · up(x)) for one token. */
function swiGlu(x: Float32Array, weights: ReferenceWeights, names: MlpNames, width: number): Float32Array {
  const gate = linear(x, weights.get(names.gate), width);
  const up = linear(x, weights.get(names.up), width);
  for (let i = 0; i < width; i++) gate[i] = (gate[i] / (1 + Math.exp(-gate[i]))) * up[i];
  return linear(gate, weights.get(names.down), x.length);
}

/** y = W x with W `[out, in]` row-major (element count checked). */
function linear(x: Float32Array, w: Float32Array, out: number): Float32Array {
  const n = x.length;
  if (w.length !== out * n) throw new Error(`weight has ${w.length} elements, expected ${out * n}`);
  const y = new Float32Array(out);
  for (let o = 0; o < out; o++) {
    let acc = 0;
    for (let i = 0; i < n; i++) acc += w[o * n + i] * x[i];
    y[o] = acc;
  }
  return y;
}
