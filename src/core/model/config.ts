/**
 * `config.json` (+ optional `generation_config.json`) → validated, normalized ModelConfig.
 * Every required field is checked for presence and type; each refusal is a CheckpointError
 * naming the file and the field.
 */
import { findArchitecture, SUPPORTED_ARCHITECTURES, type ArchitectureSpec } from './architectures.ts';
import { CheckpointError } from './checkpoint-error.ts';
import { parseQuantizationConfig } from './quant/quant-config.ts';
import { parseMoeConfig } from './moe/moe-config.ts';
import type { ModelConfig, RopeConfig } from './types.ts';

type Json = Record<string, unknown>;

/** Typed field access on one JSON object, with errors that name the file and field. */
class Fields {
  constructor(
    readonly file: string,
    readonly json: Json,
    readonly prefix = '',
  ) {}

  fail(field: string, problem: string): never {
    throw new CheckpointError(this.file, `field '${this.prefix}${field}' ${problem}`);
  }

  /** The raw value, treating `null` as absent. */
  raw(field: string): unknown {
    const value = this.json[field];
    return value === null ? undefined : value;
  }

  positiveInt(field: string, fallback?: number): number {
    const value = this.raw(field) ?? fallback;
    if (value === undefined) this.fail(field, 'is missing');
    if (!Number.isSafeInteger(value) || (value as number) <= 0) this.fail(field, `must be a positive integer, got ${JSON.stringify(value)}`);
    return value as number;
  }

  positiveNumber(field: string, fallback?: number): number {
    const value = this.raw(field) ?? fallback;
    if (value === undefined) this.fail(field, 'is missing');
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) this.fail(field, `must be a positive number, got ${JSON.stringify(value)}`);
    return value;
  }

  boolean(field: string, fallback: boolean): boolean {
    const value = this.raw(field) ?? fallback;
    if (typeof value !== 'boolean') this.fail(field, `must be true or false, got ${JSON.stringify(value)}`);
    return value;
  }

  optionalTokenId(field: string): number | undefined {
    const value = this.raw(field);
    if (value === undefined) return undefined;
    if (!Number.isSafeInteger(value) || (value as number) < 0) this.fail(field, `must be a token id, got ${JSON.stringify(value)}`);
    return value as number;
  }

  /** A token id or an array of them; absent gives []. */
  tokenIds(field: string): number[] {
    const value = this.raw(field);
    if (value === undefined) return [];
    const ids = Array.isArray(value) ? value : [value];
    if (!ids.every((id) => Number.isSafeInteger(id) && id >= 0)) this.fail(field, `must be a token id or an array of token ids, got ${JSON.stringify(value)}`);
    return ids as number[];
  }

  /** A nested object, or undefined when absent/null. */
  object(field: string): Fields | undefined {
    const value = this.raw(field);
    if (value === undefined) return undefined;
    if (typeof value !== 'object' || Array.isArray(value)) this.fail(field, `must be an object, got ${JSON.stringify(value)}`);
    return new Fields(this.file, value as Json, `${this.prefix}${field}.`);
  }
}

function asObject(file: string, json: unknown): Json {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new CheckpointError(file, 'is not a JSON object');
  return json as Json;
}

/**
 * Validates and normalizes a Hugging Face `config.json`.
 * @param file name for errors (usually `config.json`).
 * @param json the parsed config.json.
 * @param generationConfig the parsed `generation_config.json`, if the folder has one; its
 *   `eos_token_id` entries are merged after config.json's, its `bos_token_id` fills a gap, and
 *   its `max_new_tokens` becomes `maxNewTokens` (the default answer length, as vLLM reads it).
 * @throws CheckpointError naming the file and field (or the unsupported architecture/feature).
 */
export function parseModelConfig(file: string, json: unknown, generationConfig?: unknown): ModelConfig {
  const fields = new Fields(file, asObject(file, json));
  const spec = architectureOf(fields);

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
  if (activation !== 'silu') fields.fail('hidden_act', `${JSON.stringify(activation)} is not supported (supported: "silu")`);
  if (fields.boolean('mlp_bias', false)) fields.fail('mlp_bias', 'true is not supported');

  const generation = generationConfig === undefined ? undefined : new Fields('generation_config.json', asObject('generation_config.json', generationConfig));
  const eosTokenIds = [...new Set([...fields.tokenIds('eos_token_id'), ...(generation?.tokenIds('eos_token_id') ?? [])])];
  const bosTokenId = fields.optionalTokenId('bos_token_id') ?? generation?.optionalTokenId('bos_token_id');
  const slidingWindow = slidingWindowOf(fields, spec, numLayers);
  const quantization = parseQuantizationConfig(file, fields.json);
  const maxNewTokens = generation?.raw('max_new_tokens') === undefined ? undefined : generation.positiveInt('max_new_tokens');
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
    rope: ropeOf(fields, spec),
    tieWordEmbeddings: fields.boolean('tie_word_embeddings', false),
    attentionBias: spec.attentionBias === 'always' || (spec.attentionBias === 'from-config' && fields.boolean('attention_bias', false)),
    qkNorm: spec.qkNorm,
    ...(slidingWindow !== undefined ? { slidingWindow } : {}),
    ...(bosTokenId !== undefined ? { bosTokenId } : {}),
    ...(maxNewTokens !== undefined ? { maxNewTokens } : {}),
    eosTokenIds,
    ...(quantization ? { quantization } : {}),
    ...(moe ? { moe } : {}),
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

/** Rotary parameters: `rope_theta` and `rope_scaling` (or transformers 5's `rope_parameters`). */
function ropeOf(fields: Fields, spec: ArchitectureSpec): RopeConfig {
  const parameters = fields.object('rope_parameters');
  const theta = fields.raw('rope_theta') !== undefined ? fields.positiveNumber('rope_theta') : (parameters?.positiveNumber('rope_theta', 10000) ?? 10000);
  const scaling = fields.object('rope_scaling') ?? parameters;
  if (scaling === undefined) return { theta };
  const type = scaling.raw('rope_type') ?? scaling.raw('type') ?? 'default';
  if (type === 'default') return { theta };
  if (typeof type !== 'string' || !spec.ropeScalingTypes.includes(type)) {
    const supported = spec.ropeScalingTypes.length > 0 ? spec.ropeScalingTypes.join(', ') : 'none';
    scaling.fail('rope_type', `${JSON.stringify(type)} is not supported for ${spec.name} (supported: ${supported})`);
  }
  // Only 'llama3' is in the table today.
  return {
    theta,
    llama3: {
      factor: scaling.positiveNumber('factor'),
      lowFreqFactor: scaling.positiveNumber('low_freq_factor'),
      highFreqFactor: scaling.positiveNumber('high_freq_factor'),
      originalMaxPositionEmbeddings: scaling.positiveInt('original_max_position_embeddings'),
    },
  };
}

/**
 * The whole-context sliding window, or undefined. Qwen2/Qwen3 slide only layers
 * `>= max_window_layers`; a window on some layers but not others is refused.
 */
function slidingWindowOf(fields: Fields, spec: ArchitectureSpec, numLayers: number): number | undefined {
  if (spec.slidingWindow === 'none') return undefined;
  if (spec.slidingWindow === 'sliding-window') {
    return fields.raw('sliding_window') === undefined ? undefined : fields.positiveInt('sliding_window');
  }
  if (!fields.boolean('use_sliding_window', false)) return undefined;
  const window = fields.positiveInt('sliding_window');
  const fullLayers = fields.raw('max_window_layers') === undefined ? 0 : Number(fields.raw('max_window_layers'));
  if (!Number.isSafeInteger(fullLayers) || fullLayers < 0) fields.fail('max_window_layers', 'must be a non-negative integer');
  if (fullLayers >= numLayers) return undefined;
  if (fullLayers > 0) {
    fields.fail('max_window_layers', `(${fullLayers}) < num_hidden_layers (${numLayers}): a sliding window on only some layers is not supported`);
  }
  return window;
}
