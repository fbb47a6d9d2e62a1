/**
 * Mixture-of-experts fields of config.json, as Hugging Face's modeling code reads them:
 *
 * | architecture          | experts             | chosen                | expert width            | renormalized                 | sparse layers                                          | shared expert |
 * | --------------------- | ------------------- | --------------------- | ----------------------- | ---------------------------- | ------------------------------------------------------ | ------------- |
 * | MixtralForCausalLM    | `num_local_experts` | `num_experts_per_tok` | `intermediate_size`     | always                       | every layer                                            | —             |
 * | Qwen2MoeForCausalLM   | `num_experts`       | `num_experts_per_tok` | `moe_intermediate_size` | `norm_topk_prob` (false)     | not in `mlp_only_layers` and (l+1) % `decoder_sparse_step` == 0 | `shared_expert_intermediate_size`, sigmoid `shared_expert_gate` |
 * | Qwen3MoeForCausalLM   | `num_experts`       | `num_experts_per_tok` | `moe_intermediate_size` | `norm_topk_prob` (false)     | as Qwen2-MoE                                           | —             |
 *
 * A layer that is not sparse is a dense MLP of `intermediate_size` with the usual names.
 */

/** Which Hugging Face family a MoE architecture follows (tensor names and config keys). */
export type MoeFamily = 'mixtral' | 'qwen2-moe' | 'qwen3-moe' | 'gpt-oss';

export interface MoeConfig {
  readonly family: MoeFamily;
  readonly numExperts: number;
  /** Experts each token runs (`num_experts_per_tok`). */
  readonly topK: number;
  /** The chosen experts' softmax weights are divided by their sum. */
  readonly normTopK: boolean;
  /** Width of one routed expert's MLP. */
  readonly expertIntermediateSize: number;
  /** Width of the always-on shared expert (Qwen2-MoE); absent when there is none. */
  readonly sharedExpertIntermediateSize?: number;
  /** Layers whose MLP is the sparse MoE block, ascending. */
  readonly sparseLayers: readonly number[];
  /** gpt-oss's own fields (moe/gpt-oss-config.ts). */
  readonly gptOss?: GptOssConfig;
}

import { parseGptOssConfig, type GptOssConfig } from './gpt-oss-config.ts';
import type { MoeFields } from './fields.ts';

export type { MoeFields } from './fields.ts';


/** The MoE block of `family` from config.json's fields; refuses what it cannot honour by field. */
export function parseMoeConfig(fields: MoeFields, family: MoeFamily, numLayers: number): MoeConfig {
  if (family === 'gpt-oss') {
    const numExperts = fields.positiveInt('num_local_experts', 128);
    const all = Array.from({ length: numLayers }, (_, l) => l);
    return { family, numExperts, topK: topKOf(fields, numExperts, 4), normTopK: false, expertIntermediateSize: fields.positiveInt('intermediate_size'), sparseLayers: all, gptOss: parseGptOssConfig(fields, numLayers) };
  }
  if (family === 'mixtral') {
    const numExperts = fields.positiveInt('num_local_experts', 8);
    const topK = topKOf(fields, numExperts, 2);
    const all = Array.from({ length: numLayers }, (_, l) => l);
    return { family, numExperts, topK, normTopK: true, expertIntermediateSize: fields.positiveInt('intermediate_size'), sparseLayers: all };
  }
  const qwen2 = family === 'qwen2-moe'; // transformers' defaults where a key is absent
  const numExperts = fields.positiveInt('num_experts', qwen2 ? 60 : 128);
  const topK = topKOf(fields, numExperts, qwen2 ? 4 : 8);
  const step = fields.positiveInt('decoder_sparse_step', 1);
  const mlpOnly = fields.raw('mlp_only_layers') ?? [];
  if (!Array.isArray(mlpOnly) || !mlpOnly.every((l) => Number.isSafeInteger(l) && l >= 0 && l < numLayers)) {
    fields.fail('mlp_only_layers', `must be an array of layer indices in [0, ${numLayers}), got ${JSON.stringify(mlpOnly)}`);
  }
  const sparseLayers = Array.from({ length: numLayers }, (_, l) => l).filter((l) => !mlpOnly.includes(l) && (l + 1) % step === 0);
  const shared = qwen2 ? fields.positiveInt('shared_expert_intermediate_size', 5632) : undefined;
  return {
    family,
    numExperts,
    topK,
    normTopK: fields.boolean('norm_topk_prob', false),
    expertIntermediateSize: fields.positiveInt('moe_intermediate_size', qwen2 ? 1408 : 768),
    ...(shared !== undefined ? { sharedExpertIntermediateSize: shared } : {}),
    sparseLayers,
  };
}

function topKOf(fields: MoeFields, numExperts: number, fallback: number): number {
  const topK = fields.positiveInt('num_experts_per_tok', fallback);
  if (topK > numExperts) fields.fail('num_experts_per_tok', `(${topK}) must not exceed the number of experts (${numExperts})`);
  return topK;
}

/** Whether `layer`'s MLP is the sparse MoE block. */
export function isSparseLayer(moe: MoeConfig | undefined, layer: number): moe is MoeConfig {
  return moe !== undefined && moe.sparseLayers.includes(layer);
}
