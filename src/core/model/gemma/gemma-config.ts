/**
 * The Gemma 2 / Gemma 3 parts of `config.json`, read the way transformers' Gemma2Config and
 * Gemma3TextConfig do (their defaults fill what a file leaves out):
 * - Gemma3ForConditionalGeneration keeps the text model's config under `text_config` (its
 *   tensors under `language_model.model.`); only that text model is served.
 * - `layer_types` names each layer `sliding_attention` or `full_attention`; without it,
 *   layer i slides when `(i + 1) % sliding_window_pattern` is not 0 (pattern 2 for Gemma 2,
 *   6 for Gemma 3).
 * - Gemma 3's sliding layers rotate with `rope_local_base_freq` and no scaling, its full
 *   layers with `rope_theta` and `rope_scaling`; transformers 5 writes both as
 *   `rope_parameters.{sliding_attention, full_attention}`.
 */
import { Fields, type Json } from '../config-fields.ts';
import { ropeOf, type RopeContext } from '../rope-config.ts';
import type { GemmaConfig, ModelConfig, RopeConfig } from '../types.ts';

/** transformers' defaults for the keys our parser reads (Gemma2Config, Gemma3TextConfig). */
const DEFAULTS: Record<2 | 3, Json> = {
  2: {
    vocab_size: 256000, hidden_size: 3072, intermediate_size: 24576, num_hidden_layers: 28, num_attention_heads: 16,
    num_key_value_heads: 16, head_dim: 256, max_position_embeddings: 8192, rms_norm_eps: 1e-6, rope_theta: 10000,
    bos_token_id: 2, eos_token_id: 1, tie_word_embeddings: true, query_pre_attn_scalar: 256, sliding_window: 4096,
    final_logit_softcapping: 30, attn_logit_softcapping: 50, hidden_activation: 'gelu_pytorch_tanh',
  },
  3: {
    vocab_size: 262208, hidden_size: 2304, intermediate_size: 9216, num_hidden_layers: 26, num_attention_heads: 8,
    num_key_value_heads: 4, head_dim: 256, max_position_embeddings: 131072, rms_norm_eps: 1e-6, rope_theta: 1000000,
    bos_token_id: 2, eos_token_id: 1, tie_word_embeddings: true, query_pre_attn_scalar: 256, sliding_window: 4096,
    rope_local_base_freq: 10000, hidden_activation: 'gelu_pytorch_tanh',
  },
};

/** The activation Gemma's MLP uses; anything else is refused. */
export const GEMMA_ACTIVATION = 'gelu_pytorch_tanh';

/**
 * The fields of the text model, with transformers' defaults under them: `text_config` for a
 * Gemma3ForConditionalGeneration file (ids that only the top level names are kept), the file
 * itself otherwise.
 */
export function gemmaTextFields(top: Fields, version: 2 | 3, textConfig: boolean): Fields {
  const text = textConfig ? top.object('text_config') : top;
  if (text === undefined) top.fail('text_config', 'is missing (Gemma3ForConditionalGeneration keeps the text model there)');
  const own = Object.fromEntries(Object.entries(text.json).filter(([, value]) => value !== null));
  const merged: Json = { ...DEFAULTS[version], ...(textConfig ? pick(top.json, ['bos_token_id']) : {}), ...own };
  if (textConfig && top.raw('eos_token_id') !== undefined) merged.eos_token_id = [...top.tokenIds('eos_token_id'), ...text.tokenIds('eos_token_id')];
  return new Fields(top.file, merged, text.prefix);
}

function pick(json: Json, keys: readonly string[]): Json {
  return Object.fromEntries(keys.filter((key) => json[key] !== undefined && json[key] !== null).map((key) => [key, json[key]]));
}

/** What a Gemma config adds to ModelConfig. */
export type GemmaParts = Pick<ModelConfig, 'gemma' | 'rope' | 'localRope' | 'slidingWindow' | 'slidingLayers' | 'tensorPrefix'>;

export function gemmaParts(fields: Fields, spec: RopeContext & { readonly gemma: 2 | 3; readonly textConfig?: boolean }, numLayers: number): GemmaParts {
  const activation = fields.raw('hidden_activation') ?? fields.raw('hidden_act');
  if (activation !== GEMMA_ACTIVATION) fields.fail('hidden_activation', `${JSON.stringify(activation)} is not supported for ${spec.name} (supported: "${GEMMA_ACTIVATION}")`);
  const gemma: GemmaConfig = {
    version: spec.gemma,
    queryPreAttnScalar: fields.positiveNumber('query_pre_attn_scalar'),
    ...optional('attnLogitSoftcap', fields.optionalPositiveNumber('attn_logit_softcapping')),
    ...optional('finalLogitSoftcap', fields.optionalPositiveNumber('final_logit_softcapping')),
  };
  const slidingLayers = layerTypes(fields, numLayers, spec.gemma === 2 ? 2 : 6);
  const window = slidingLayers.some(Boolean) ? fields.positiveInt('sliding_window') : undefined;
  const { rope, localRope } = spec.gemma === 3 ? gemma3Rope(fields, spec) : { rope: ropeOf(fields, spec), localRope: undefined };
  return {
    gemma,
    rope,
    ...optional('localRope', localRope),
    ...(window !== undefined ? { slidingWindow: window, slidingLayers } : {}),
    ...(spec.textConfig ? { tensorPrefix: 'language_model.model.' } : {}),
  };
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

/** Each layer slides (true) or attends to everything (false). */
function layerTypes(fields: Fields, numLayers: number, defaultPattern: number): boolean[] {
  const types = fields.raw('layer_types');
  if (types === undefined) {
    const pattern = fields.positiveInt('sliding_window_pattern', defaultPattern);
    return Array.from({ length: numLayers }, (_, i) => (i + 1) % pattern !== 0);
  }
  if (!Array.isArray(types) || types.length !== numLayers || !types.every((t) => t === 'sliding_attention' || t === 'full_attention')) {
    fields.fail('layer_types', `must list ${numLayers} entries, each "sliding_attention" or "full_attention"`);
  }
  return types.map((t) => t === 'sliding_attention');
}

/** Global layers: rope_theta + rope_scaling; local layers: rope_local_base_freq, unscaled. */
function gemma3Rope(fields: Fields, spec: RopeContext): { rope: RopeConfig; localRope: RopeConfig } {
  const parameters = fields.object('rope_parameters');
  const full = parameters?.object('full_attention');
  const sliding = parameters?.object('sliding_attention');
  const entry = (one: Fields) => new Fields(one.file, { rope_parameters: one.json }, fields.prefix);
  if (full && sliding) return { rope: ropeOf(entry(full), spec, 1000000), localRope: ropeOf(entry(sliding), { ...spec, ropeScalingTypes: [] }, 10000) };
  return { rope: ropeOf(fields, spec, 1000000), localRope: { theta: fields.positiveNumber('rope_local_base_freq') } };
}
