/**
 * `config.json` (+ optional `generation_config.json`) → validated, normalized ModelConfig.
 * Every required field is checked for presence and type; each refusal is a CheckpointError
 * naming the file and the field.
 */
import { findArchitecture, SUPPORTED_ARCHITECTURES, type ArchitectureSpec } from './architectures.ts';
import { CheckpointError } from './checkpoint-error.ts';
import { asObject, Fields } from './config-fields.ts';
import { parseQuantizationConfig } from './quant/quant-config.ts';
import { gemmaParts, gemmaTextFields } from './gemma/gemma-config.ts';
import { phi3Parts } from './phi3/phi3-config.ts';
import { ropeOf } from './rope-config.ts';
import type { ModelConfig } from './types.ts';
import { parseMoeConfig } from './moe/moe-config.ts';
import { gptOssWindows } from './moe/gpt-oss-config.ts';

/**
 * Validates and normalizes a Hugging Face `config.json`.
 * @param file name for errors (usually `config.json`).
 * @param json the parsed config.json.
 * @param generationConfig the parsed `generation_config.json`, if the folder has one; its
 *   `eos_token_id` entries are merged after config.json's, its `bos_token_id` fills a gap, and
 *   its `max_new_tokens` becomes `maxNewTokens` (the default answer length, as vLLM reads it),
 *   and meshnet's own `meshnet_natural_end: { min_new_tokens, ends_with }` becomes `naturalEnd`.
 * @throws CheckpointError naming the file and field (or the unsupported architecture/feature).
 */
export function parseModelConfig(file: string, json: unknown, generationConfig?: unknown): ModelConfig {
  const top = new Fields(file, asObject(file, json));
  const spec = architectureOf(top);
  const fields = spec.gemma ? gemmaTextFields(top, spec.gemma, spec.textConfig === true) : top;

  const hiddenSize = fields.positiveInt('hidden_size');
  const numHeads = fields.positiveInt('num_attention_heads');
  const numKvHeads = fields.positiveInt('num_key_value_heads', numHeads);
  if (numHeads % numKvHeads !== 0) {
    fields.fail('num_key_value_heads', `(${numKvHeads}) must divide num_attention_heads (${numHeads})`);
  }
  if (fields.raw('head_dim') === undefined && hiddenSize % numHeads !== 0) {
    fields.fail('head_dim', `is missing and hidden_size (${hiddenSize}) is not divisible by num_attention_heads (${numHeads})`);
  }
  const headDim = fields.positiveInt('head_dim', hiddenSize / numHeads);
  const numLayers = fields.positiveInt('num_hidden_layers');

  const activation = fields.raw('hidden_act') ?? 'silu';
  if (!spec.gemma && activation !== 'silu') fields.fail('hidden_act', `${JSON.stringify(activation)} is not supported (supported: "silu")`);
  if (fields.boolean('mlp_bias', false)) fields.fail('mlp_bias', 'true is not supported');

  const generation = generationConfig === undefined ? undefined : new Fields('generation_config.json', asObject('generation_config.json', generationConfig));
  const eosTokenIds = [...new Set([...fields.tokenIds('eos_token_id'), ...(generation?.tokenIds('eos_token_id') ?? [])])];
  const bosTokenId = fields.optionalTokenId('bos_token_id') ?? generation?.optionalTokenId('bos_token_id');
  const slidingWindow = slidingWindowOf(fields, spec, numLayers);
  const quantization = spec.moe === 'gpt-oss' ? undefined : parseQuantizationConfig(file, top.json); // gpt-oss: MXFP4, moe/gpt-oss-config.ts
  const family = spec.gemma ? gemmaParts(fields, { ...spec, gemma: spec.gemma }, numLayers) : spec.phi3 ? phi3Parts(fields, spec, headDim) : { rope: ropeOf(fields, spec) };
  const maxNewTokens = generation?.raw('max_new_tokens') === undefined ? undefined : generation.positiveInt('max_new_tokens');
  const naturalEnd = generation ? naturalEndOf(generation) : undefined;
  const moe = spec.moe ? parseMoeConfig(fields, spec.moe, numLayers) : undefined;

  return {
    architecture: spec.name,
    hiddenSize,
    intermediateSize: fields.positiveInt('intermediate_size'),
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    vocabSize: fields.positiveInt('vocab_size'),
    maxPositionEmbeddings: fields.positiveInt('max_position_embeddings'),
    rmsNormEps: fields.positiveNumber('rms_norm_eps'),
    tieWordEmbeddings: fields.boolean('tie_word_embeddings', false),
    attentionBias: spec.attentionBias === 'always' || (spec.attentionBias === 'from-config' && fields.boolean('attention_bias', false)),
    qkNorm: spec.qkNorm,
    ...slidingWindow,
    ...family,
    ...(bosTokenId !== undefined ? { bosTokenId } : {}),
    ...(maxNewTokens !== undefined ? { maxNewTokens } : {}),
    ...(naturalEnd !== undefined ? { naturalEnd } : {}),
    eosTokenIds,
    ...(quantization ? { quantization } : {}),
    ...(moe ? { moe } : {}),
    ...(moe?.gptOss ? gptOssWindows(moe.gptOss, numLayers) : {}), // layer_types → the shared per-layer window
  };
}

function architectureOf(fields: Fields): ArchitectureSpec {
  const names = fields.raw('architectures');
  if (names === undefined) fields.fail('architectures', 'is missing');
  if (!Array.isArray(names) || names.length === 0 || typeof names[0] !== 'string') {
    fields.fail('architectures', `must be a non-empty array of names, got ${JSON.stringify(names)}`);
  }
  const spec = findArchitecture(names[0]);
  if (spec === undefined) {
    throw new CheckpointError(fields.file, `architecture '${names[0]}' is not supported (supported: ${SUPPORTED_ARCHITECTURES.join(', ')})`);
  }
  return spec;
}

/**
 * The sliding window and the layers it applies to. Mistral slides every layer; Qwen2/Qwen3
 * slide layers `>= max_window_layers` (transformers' `layer_types`) when `use_sliding_window`.
 */
function slidingWindowOf(fields: Fields, spec: ArchitectureSpec, numLayers: number): Pick<ModelConfig, 'slidingWindow' | 'slidingLayers'> {
  if (spec.slidingWindow === 'none' || spec.slidingWindow === 'layer-types') return {}; // layer-types: gemma/gemma-config.ts
  if (spec.slidingWindow === 'sliding-window') {
    return fields.raw('sliding_window') === undefined ? {} : { slidingWindow: fields.positiveInt('sliding_window') };
  }
  if (!fields.boolean('use_sliding_window', false)) return {};
  const window = fields.positiveInt('sliding_window');
  const fullLayers = fields.raw('max_window_layers') === undefined ? 0 : Number(fields.raw('max_window_layers'));
  if (!Number.isSafeInteger(fullLayers) || fullLayers < 0) fields.fail('max_window_layers', 'must be a non-negative integer');
  if (fullLayers >= numLayers) return {};
  if (fullLayers === 0) return { slidingWindow: window };
  return { slidingWindow: window, slidingLayers: Array.from({ length: numLayers }, (_, i) => i >= fullLayers) };
}

/** `meshnet_natural_end`: `{ "min_new_tokens": n > 0, "ends_with": [non-empty strings] }`, or absent. */
function naturalEndOf(generation: Fields): ModelConfig['naturalEnd'] {
  const end = generation.object('meshnet_natural_end');
  if (end === undefined) return undefined;
  const endsWith = end.raw('ends_with');
  if (!Array.isArray(endsWith) || endsWith.length === 0 || !endsWith.every((s) => typeof s === 'string' && s !== '')) {
    end.fail('ends_with', `must be a non-empty array of non-empty strings, got ${JSON.stringify(endsWith)?.slice(0, 80)}`);
  }
  return { minNewTokens: end.positiveInt('min_new_tokens'), endsWith: endsWith as string[] };
}
