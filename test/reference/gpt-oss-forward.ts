/**
 * gpt-oss pieces of the pure-TypeScript reference, from Hugging Face's modeling_gpt_oss.py:
 * the router (logits + bias, top k of the logits, softmax over those k), the experts
 * (gate_up = x·W_gu + b with gate/up interleaved; gate clamped above at the limit, up to
 * ±limit; (up + 1) · gate · σ(1.702 · gate); down = h·W_d + b), and the
 * MXFP4 decoding of transformers' `convert_moe_packed_tensors` (FP4 table × 2^(s − 127)),
 * written independently of src/core/model/moe/mxfp4.ts for tests to compare against.
 */
import { gptOssLayerNames } from '../../src/core/model/moe/gpt-oss-names.ts';
import type { ModelConfig } from '../../src/core/model/types.ts';
import type { ReferenceWeights } from './forward.ts';

const FP4_VALUES = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];

/** MXFP4 `blocks` [..., G, 16] and `scales` [..., G] → values [..., G·32] (rows of the [out, in] weight). */
export function decodeMxfp4(blocks: Uint8Array, scales: Uint8Array): Float32Array {
  const out = new Float32Array(blocks.length * 2);
  for (let i = 0; i < blocks.length; i++) {
    const scale = 2 ** (scales[Math.floor(i / 16)] - 127);
    out[2 * i] = FP4_VALUES[blocks[i] & 0x0f] * scale;
    out[2 * i + 1] = FP4_VALUES[blocks[i] >> 4] * scale;
  }
  return out;
}

/** gpt-oss's MoE block for one normed token `x`, or undefined for other architectures. */
export function referenceGptOssMoe(config: ModelConfig, weights: ReferenceWeights, layer: number, x: Float32Array): Float32Array | undefined {
  const names = gptOssLayerNames(config, layer);
  if (!names) return undefined;
  const { numExperts: E, topK, expertIntermediateSize: I, gptOss } = config.moe!;
  const H = config.hiddenSize;
  const router = weights.get(names.router);
  const routerBias = weights.get(names.routerBias);
  const logits = Array.from({ length: E }, (_, e) => {
    let acc = routerBias[e];
    for (let i = 0; i < H; i++) acc += router[e * H + i] * x[i];
    return Math.fround(acc);
  });
  const chosen = logits.map((_, e) => e).sort((a, b) => logits[b] - logits[a] || a - b).slice(0, topK);
  weights.onRoute?.(layer, chosen);
  const max = logits[chosen[0]];
  const exps = chosen.map((e) => Math.exp(logits[e] - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  const gateUp = weights.get(names.gateUp); // [E, H, 2I]
  const gateUpBias = weights.get(names.gateUpBias); // [E, 2I]
  const down = weights.get(names.down); // [E, I, H]
  const downBias = weights.get(names.downBias); // [E, H]
  const out = new Float64Array(H);
  chosen.forEach((e, k) => {
    const weight = Math.fround(exps[k] / sum);
    const h = new Float32Array(I);
    for (let j = 0; j < I; j++) {
      let g = gateUpBias[e * 2 * I + 2 * j];
      let u = gateUpBias[e * 2 * I + 2 * j + 1];
      for (let i = 0; i < H; i++) {
        g += x[i] * gateUp[(e * H + i) * 2 * I + 2 * j];
        u += x[i] * gateUp[(e * H + i) * 2 * I + 2 * j + 1];
      }
      const gate = Math.min(Math.fround(g), gptOss!.swigluLimit);
      const up = Math.max(-gptOss!.swigluLimit, Math.min(Math.fround(u), gptOss!.swigluLimit));
      h[j] = (up + 1) * gate * (1 / (1 + Math.exp(-gate * gptOss!.alpha)));
    }
    for (let o = 0; o < H; o++) {
      let acc = downBias[e * H + o];
      for (let j = 0; j < I; j++) acc += h[j] * down[(e * I + j) * H + o];
      out[o] += Math.fround(Math.fround(acc) * weight);
    }
  });
  return Float32Array.from(out);
}
