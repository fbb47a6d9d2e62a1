/** Shared model types: the normalized config and where each tensor lives on disk. */

import type { PrequantizedConfig } from './quant/quant-config.ts';
import type { MoeConfig } from './moe/moe-config.ts';
import type { YarnConfig } from './moe/yarn.ts';

/** Half-open layer range: layers `start, start+1, …, end-1`. */
export interface LayerRange {
  readonly start: number;
  readonly end: number; // exclusive
}

/** Checkpoint tensor dtypes: floats, I32 for the packed integers of AWQ/GPTQ checkpoints, U8 for MXFP4 blocks and scales (gpt-oss). */
export type TensorDtype = 'F32' | 'F16' | 'BF16' | 'I32' | 'U8';
/** The float subset: what weights, norms and embeddings may be stored as. */
export type FloatDtype = Exclude<TensorDtype, 'I32' | 'U8'>;

/** Rotary position embedding parameters after `rope_scaling` is resolved. */
export interface RopeConfig {
  readonly theta: number;
  /** `llama3` frequency scaling, or undefined for plain rotary. */
  readonly llama3?: {
    readonly factor: number;
    readonly lowFreqFactor: number;
    readonly highFreqFactor: number;
    readonly originalMaxPositionEmbeddings: number;
  };
  /** YaRN scaling (gpt-oss), moe/yarn.ts. */
  readonly yarn?: YarnConfig;
  /** `linear` scaling: every inverse frequency divided by `factor` (Gemma 3's global layers). */
  readonly linearFactor?: number;
  /**
   * `longrope` (Phi-3): per-frequency divisors, `short` for sequences up to
   * `originalMaxPositionEmbeddings`, `long` beyond; cos and sin are multiplied by `attentionFactor`.
   */
  readonly longrope?: {
    readonly shortFactor: readonly number[];
    readonly longFactor: readonly number[];
    readonly originalMaxPositionEmbeddings: number;
    readonly attentionFactor: number;
  };
}

/** Gemma 2 / Gemma 3 specifics (model/gemma/gemma-config.ts). */
export interface GemmaConfig {
  readonly version: 2 | 3;
  /** Attention scores are scaled by `queryPreAttnScalar ** -0.5` (not headDim's). */
  readonly queryPreAttnScalar: number;
  /** Gemma 2: scores become `tanh(s / cap) * cap` before the mask. */
  readonly attnLogitSoftcap?: number;
  /** Gemma 2: logits become `tanh(l / cap) * cap`. */
  readonly finalLogitSoftcap?: number;
}

/**
 * A checkpoint's `config.json`, validated and normalized across architectures.
 * Every field the graph builder and the reference forward pass need is here.
 */
export interface ModelConfig {
  readonly architecture: string; // e.g. 'LlamaForCausalLM'
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number; // config.head_dim or hiddenSize / numHeads
  readonly vocabSize: number;
  readonly maxPositionEmbeddings: number;
  readonly rmsNormEps: number;
  readonly rope: RopeConfig;
  readonly tieWordEmbeddings: boolean;
  /** q/k/v projections carry biases (Qwen2). */
  readonly attentionBias: boolean;
  /** Per-head RMSNorm on q and k before rotary (Qwen3). */
  readonly qkNorm: boolean;
  /** Sliding window size (positions a query sees, itself included) of the windowed layers; undefined: none. */
  readonly slidingWindow?: number;
  /** Which layers the window applies to (true: windowed); absent: every layer when `slidingWindow` is set. */
  readonly slidingLayers?: readonly boolean[];
  /** Rotary of the windowed layers when it differs from `rope` (Gemma 3's `rope_local_base_freq`). */
  readonly localRope?: RopeConfig;
  /** Rotary on the first `rotaryDim` dimensions of each head only (Phi-3's `partial_rotary_factor`); absent: all of headDim. */
  readonly rotaryDim?: number;
  /** q/k/v as one `qkv_proj` and gate/up as one `gate_up_proj` (Phi-3), kept fused in the graphs. */
  readonly fusedProjections?: boolean;
  /** Where the text model's tensors live: `model.` (default), `language_model.model.` in a Gemma3ForConditionalGeneration checkpoint. */
  readonly tensorPrefix?: string;
  /** Gemma 2/3: scaled embedding, (1 + w) norms, norms before and after attention and MLP, GELU-tanh, softcaps. */
  readonly gemma?: GemmaConfig;
  readonly bosTokenId?: number;
  /** generation_config.json's `max_new_tokens`: how long an answer is when the request sets no limit. */
  readonly maxNewTokens?: number;
  /**
   * generation_config.json's `meshnet_natural_end` (a meshnet field): an unconstrained answer
   * ends (`stop`, the token kept) at a token whose text ends with one of `endsWith`, once it
   * has `minNewTokens` tokens. For models that know no end of turn (the demo).
   */
  readonly naturalEnd?: { readonly minNewTokens: number; readonly endsWith: readonly string[] };
  /** End-of-sequence ids (config.json and generation_config.json merged). */
  readonly eosTokenIds: readonly number[];
  /** Present when the checkpoint comes pre-quantized (AWQ / GPTQ `quantization_config`). */
  readonly quantization?: PrequantizedConfig;
  /** Mixture-of-experts layers (Mixtral, Qwen2-MoE, Qwen3-MoE): see moe/moe-config.ts. */
  readonly moe?: MoeConfig;
}

/** One tensor inside one safetensors file, located by absolute byte offset in that file. */
export interface TensorLocation {
  readonly name: string;
  readonly file: string; // file name relative to the checkpoint folder
  readonly dtype: TensorDtype;
  readonly shape: readonly number[];
  readonly offset: number; // absolute byte offset of the data in the file
  readonly length: number; // byte length
}
