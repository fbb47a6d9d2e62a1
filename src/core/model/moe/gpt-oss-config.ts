/**
 * gpt-oss's fields besides the MoE basics (Hugging Face's GptOssConfig):
 * - `layer_types`: "sliding_attention" | "full_attention" per layer (default: alternating,
 *   sliding first), `sliding_window` (128) for the sliding ones;
 * - `swiglu_limit` (7.0): the clamp of the experts' SwiGLU; its alpha is 1.702 (a constant
 *   of the modeling code, not a config key);
 * - `quantization_config` `{ quant_method: "mxfp4" }`: the experts ship as MXFP4
 *   `*_blocks` / `*_scales`; absent: bf16/f32 `gate_up_proj` / `down_proj` tensors.
 * Attention sinks, q/k/v/o biases (`attention_bias`, true in every published config) and
 * YaRN (`rope_scaling`, moe/yarn.ts) are read elsewhere.
 */
import type { MoeFields } from './fields.ts';

export interface GptOssConfig {
  /** The experts are MXFP4 blocks (loaded as exact 8-bit blocks, moe/mxfp4.ts). */
  readonly mxfp4: boolean;
  readonly swigluLimit: number;
  readonly alpha: number;
  /** Layers attending within `slidingWindow` positions (the rest attend to everything). */
  readonly slidingLayers: readonly number[];
  readonly slidingWindow: number;
}

/** gpt-oss's sliding layers as ModelConfig's `slidingWindow` / `slidingLayers` (layer-attention.ts applies them). */
export function gptOssWindows(gptOss: GptOssConfig, numLayers: number): { slidingWindow: number; slidingLayers: boolean[] } {
  return { slidingWindow: gptOss.slidingWindow, slidingLayers: Array.from({ length: numLayers }, (_, l) => gptOss.slidingLayers.includes(l)) };
}

export function parseGptOssConfig(fields: MoeFields, numLayers: number): GptOssConfig {
  const types = fields.raw('layer_types') ?? Array.from({ length: numLayers }, (_, l) => (l % 2 === 0 ? 'sliding_attention' : 'full_attention'));
  if (!Array.isArray(types) || types.length !== numLayers || !types.every((t) => t === 'sliding_attention' || t === 'full_attention')) {
    fields.fail('layer_types', `must list "sliding_attention" or "full_attention" for each of the ${numLayers} layers, got ${JSON.stringify(types)}`);
  }
  const quant = fields.raw('quantization_config');
  let mxfp4 = false;
  if (quant !== undefined) {
    const method = typeof quant === 'object' && quant !== null ? (quant as Record<string, unknown>).quant_method : undefined;
    if (method !== 'mxfp4') fields.fail('quantization_config', `quant_method ${JSON.stringify(method)} is not supported for gpt-oss (supported: "mxfp4", or none)`);
    mxfp4 = true;
  }
  if (!fields.boolean('attention_bias', true)) fields.fail('attention_bias', 'false is not supported for gpt-oss');
  return {
    mxfp4,
    swigluLimit: fields.positiveNumber('swiglu_limit', 7),
    alpha: 1.702,
    slidingLayers: types.flatMap((t, l) => (t === 'sliding_attention' ? [l] : [])),
    slidingWindow: fields.positiveInt('sliding_window', 128),
  };
}
