/**
 * The table of supported architectures and the tensor names each one uses.
 * Adding an architecture means adding one row here (and, if its weights are named
 * differently, a naming scheme); `parseModelConfig` and `openCheckpoint` read only this table.
 */
import type { ModelConfig } from './types.ts';
import type { MoeFamily } from './moe/moe-config.ts';
import { moeTensorShapes } from './moe/moe-names.ts';

/** How an architecture decides whether q/k/v projections carry biases. */
type BiasRule = 'never' | 'always' | 'from-config'; // from-config: `attention_bias`, default false
/** How an architecture records a sliding window. */
type SlidingWindowRule =
  | 'none'
  | 'sliding-window' // `sliding_window` when not null (Mistral)
  | 'use-sliding-window' // `sliding_window` only when `use_sliding_window` is true (Qwen2/Qwen3)
  | 'layer-types'; // `sliding_window` on the layers `layer_types` (or Gemma's pattern) names sliding

/** One supported architecture, keyed by the `architectures[0]` name in config.json. */
export interface ArchitectureSpec {
  readonly name: string;
  readonly attentionBias: BiasRule;
  /** Per-head RMSNorm on q and k (`q_norm`, `k_norm`) before rotary. */
  readonly qkNorm: boolean;
  readonly slidingWindow: SlidingWindowRule;
  /** `rope_scaling` types accepted besides none/`default`. */
  readonly ropeScalingTypes: readonly string[];
  /** Gemma 2 / Gemma 3 (model/gemma/): parsed and built the Gemma way; absent: the Llama way. */
  readonly gemma?: 2 | 3;
  /** The text model's config sits under `text_config` and its tensors under `language_model.model.` (Gemma3ForConditionalGeneration). */
  readonly textConfig?: boolean;
  /** Phi-3 (model/phi3/): fused projections, partial rotary, longrope. */
  readonly phi3?: boolean;
  /** Sparse mixture-of-experts MLPs (moe/moe-config.ts). */
  readonly moe?: MoeFamily;
}

export const ARCHITECTURES: readonly ArchitectureSpec[] = [
  { name: 'LlamaForCausalLM', attentionBias: 'from-config', qkNorm: false, slidingWindow: 'none', ropeScalingTypes: ['llama3'] },
  { name: 'MistralForCausalLM', attentionBias: 'never', qkNorm: false, slidingWindow: 'sliding-window', ropeScalingTypes: [] },
  { name: 'Qwen2ForCausalLM', attentionBias: 'always', qkNorm: false, slidingWindow: 'use-sliding-window', ropeScalingTypes: [] },
  { name: 'Qwen3ForCausalLM', attentionBias: 'from-config', qkNorm: true, slidingWindow: 'use-sliding-window', ropeScalingTypes: [] },
  { name: 'Phi3ForCausalLM', attentionBias: 'never', qkNorm: false, slidingWindow: 'sliding-window', ropeScalingTypes: ['longrope'], phi3: true },
  { name: 'Gemma2ForCausalLM', attentionBias: 'from-config', qkNorm: false, slidingWindow: 'layer-types', ropeScalingTypes: [], gemma: 2 },
  { name: 'Gemma3ForCausalLM', attentionBias: 'from-config', qkNorm: true, slidingWindow: 'layer-types', ropeScalingTypes: ['linear'], gemma: 3 },
  { name: 'Gemma3ForConditionalGeneration', attentionBias: 'from-config', qkNorm: true, slidingWindow: 'layer-types', ropeScalingTypes: ['linear'], gemma: 3, textConfig: true },
  { name: 'MixtralForCausalLM', attentionBias: 'never', qkNorm: false, slidingWindow: 'sliding-window', ropeScalingTypes: [], moe: 'mixtral' },
  { name: 'Qwen2MoeForCausalLM', attentionBias: 'always', qkNorm: false, slidingWindow: 'use-sliding-window', ropeScalingTypes: [], moe: 'qwen2-moe' },
  { name: 'Qwen3MoeForCausalLM', attentionBias: 'from-config', qkNorm: true, slidingWindow: 'use-sliding-window', ropeScalingTypes: [], moe: 'qwen3-moe' },
  { name: 'GptOssForCausalLM', attentionBias: 'from-config', qkNorm: false, slidingWindow: 'none', ropeScalingTypes: ['yarn'], moe: 'gpt-oss' },
];

/**
 * Why image input is refused by name for a checkpoint that has a vision model meshnet does not
 * run (Gemma3ForConditionalGeneration: its text model is served, its vision tower is not
 * loaded); undefined for text-only architectures (their generic text-only refusal applies).
 */
export function imageRefusal(architecture: string): string | undefined {
  if (!findArchitecture(architecture)?.textConfig) return undefined;
  return `this ${architecture} checkpoint is served as text only (meshnet runs its language model, not its vision tower): send text parts only`;
}

/** Names of the supported architectures, in table order. */
export const SUPPORTED_ARCHITECTURES: readonly string[] = ARCHITECTURES.map((spec) => spec.name);

/** The table row for `name`, or undefined when unsupported. */
export function findArchitecture(name: string): ArchitectureSpec | undefined {
  return ARCHITECTURES.find((spec) => spec.name === name);
}

/** Tensor names of one decoder layer. Optional names are absent when the config has no such tensor. */
export interface LayerTensorNames {
  readonly inputNorm: string; //            [hidden]
  /** Phi-3: q, k and v rows stacked [(numHeads + 2 numKvHeads) * headDim, hidden]; q/k/v names are then not in the checkpoint. */
  readonly qkvProj?: string;
  /** Phi-3: gate then up rows stacked [2 * intermediate, hidden]; gate/up names are then not in the checkpoint. */
  readonly gateUpProj?: string;
  readonly qProj: string; //                [numHeads * headDim, hidden]
  readonly kProj: string; //                [numKvHeads * headDim, hidden]
  readonly vProj: string; //                [numKvHeads * headDim, hidden]
  readonly oProj: string; //                [hidden, numHeads * headDim]
  readonly qBias?: string; //               [numHeads * headDim]   (attentionBias)
  readonly kBias?: string; //               [numKvHeads * headDim] (attentionBias)
  readonly vBias?: string; //               [numKvHeads * headDim] (attentionBias)
  readonly qNorm?: string; //               [headDim]              (qkNorm)
  readonly kNorm?: string; //               [headDim]              (qkNorm)
  readonly postNorm: string; //             [hidden] post_attention_layernorm
  readonly preFeedforwardNorm?: string; //  [hidden]               (Gemma)
  readonly postFeedforwardNorm?: string; // [hidden]               (Gemma)
  readonly gateProj: string; //             [intermediate, hidden]
  readonly upProj: string; //               [intermediate, hidden]
  readonly downProj: string; //             [hidden, intermediate]
}

/** Tensor names outside the decoder layers. */
export interface HeadTensorNames {
  readonly embedTokens: string; // [vocab, hidden]
  readonly finalNorm: string; //   [hidden]
  /** The LM head matrix [vocab, hidden]: `lm_head.weight`, or the embedding itself when tied. */
  readonly lmHead: string;
}

/** The tensor names of layer `layer` (0-based) for `config`'s architecture. */
export function layerTensorNames(config: ModelConfig, layer: number): LayerTensorNames {
  const p = `${config.tensorPrefix ?? 'model.'}layers.${layer}`;
  return {
    ...(config.fusedProjections ? { qkvProj: `${p}.self_attn.qkv_proj.weight`, gateUpProj: `${p}.mlp.gate_up_proj.weight` } : {}),
    inputNorm: `${p}.input_layernorm.weight`,
    qProj: `${p}.self_attn.q_proj.weight`,
    kProj: `${p}.self_attn.k_proj.weight`,
    vProj: `${p}.self_attn.v_proj.weight`,
    oProj: `${p}.self_attn.o_proj.weight`,
    ...(config.attentionBias
      ? { qBias: `${p}.self_attn.q_proj.bias`, kBias: `${p}.self_attn.k_proj.bias`, vBias: `${p}.self_attn.v_proj.bias` }
      : {}),
    ...(config.qkNorm ? { qNorm: `${p}.self_attn.q_norm.weight`, kNorm: `${p}.self_attn.k_norm.weight` } : {}),
    postNorm: `${p}.post_attention_layernorm.weight`,
    ...(config.gemma ? { preFeedforwardNorm: `${p}.pre_feedforward_layernorm.weight`, postFeedforwardNorm: `${p}.post_feedforward_layernorm.weight` } : {}),
    gateProj: `${p}.mlp.gate_proj.weight`,
    upProj: `${p}.mlp.up_proj.weight`,
    downProj: `${p}.mlp.down_proj.weight`,
  };
}

/** The embedding, final norm and LM head names for `config`. */
export function headTensorNames(config: ModelConfig): HeadTensorNames {
  const prefix = config.tensorPrefix ?? 'model.';
  const embedTokens = `${prefix}embed_tokens.weight`;
  const lmHead = `${prefix.slice(0, -'model.'.length)}lm_head.weight`; // beside the `model.` part of the prefix
  return { embedTokens, finalNorm: `${prefix}norm.weight`, lmHead: config.tieWordEmbeddings ? embedTokens : lmHead };
}

/** A tensor the model needs, with the shape it must have. */
export interface RequiredTensor {
  readonly name: string;
  readonly shape: readonly number[];
  /** Not a float tensor: MXFP4 blocks and scales are U8. */
  readonly dtype?: 'U8';
}

/** Every tensor of layer `layer`, with its expected shape. */
export function layerTensorShapes(config: ModelConfig, layer: number): RequiredTensor[] {
  const names = layerTensorNames(config, layer);
  const { hiddenSize: hidden, intermediateSize: inter, headDim } = config;
  const q = config.numHeads * headDim;
  const kv = config.numKvHeads * headDim;
  const shapes: [string | undefined, number[]][] = [
    [names.inputNorm, [hidden]],
    ...(names.qkvProj
      ? ([[names.qkvProj, [q + 2 * kv, hidden]]] as [string, number[]][])
      : ([[names.qProj, [q, hidden]], [names.kProj, [kv, hidden]], [names.vProj, [kv, hidden]]] as [string, number[]][])),
    [names.oProj, [hidden, q]],
    [names.qBias, [q]],
    [names.kBias, [kv]],
    [names.vBias, [kv]],
    [names.qNorm, [headDim]],
    [names.kNorm, [headDim]],
    [names.postNorm, [hidden]],
    [names.preFeedforwardNorm, [hidden]],
    [names.postFeedforwardNorm, [hidden]],
  ];
  const moe = moeTensorShapes(config, layer); // a sparse layer has experts instead of one MLP
  if (moe.length === 0 && names.gateUpProj) shapes.push([names.gateUpProj, [2 * inter, hidden]], [names.downProj, [hidden, inter]]);
  else if (moe.length === 0) shapes.push([names.gateProj, [inter, hidden]], [names.upProj, [inter, hidden]], [names.downProj, [hidden, inter]]);
  return [...shapes.filter((entry): entry is [string, number[]] => entry[0] !== undefined).map(([name, shape]) => ({ name, shape })), ...moe];
}

/** The embedding, final norm and (untied) LM head with their expected shapes. */
export function headTensorShapes(config: ModelConfig): RequiredTensor[] {
  const names = headTensorNames(config);
  const required = [
    { name: names.embedTokens, shape: [config.vocabSize, config.hiddenSize] },
    { name: names.finalNorm, shape: [config.hiddenSize] },
  ];
  if (!config.tieWordEmbeddings) required.push({ name: names.lmHead, shape: [config.vocabSize, config.hiddenSize] });
  return required;
}

/** Every tensor the whole model needs: head tensors, then layers 0..numLayers-1. */
export function requiredTensors(config: ModelConfig): RequiredTensor[] {
  const required = headTensorShapes(config);
  for (let layer = 0; layer < config.numLayers; layer++) required.push(...layerTensorShapes(config, layer));
  return required;
}
