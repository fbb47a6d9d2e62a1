/**
 * How long a sequence may grow and which tokens end it, derived once from the model's config
 * and tokenizer. The shard graph's rotary table, the Route Session's admission and the CLI
 * all read these; none decides on its own.
 */
import type { ModelConfig } from './types.ts';

/** Rotary caches never cover more positions than this (keeps graphs small). */
export const MAX_ROTARY_POSITIONS = 32768;

/** Positions the shard graph's rotary cos/sin tables cover: the model's context, capped. */
export function rotaryPositions(config: Pick<ModelConfig, 'maxPositionEmbeddings'>): number {
  return Math.min(config.maxPositionEmbeddings, MAX_ROTARY_POSITIONS);
}

export interface GenerationLimits {
  /**
   * Positions a sequence (prompt + completion) may hold: `max_position_embeddings`, within
   * the rotary table the graphs were built with. A sliding window does not bound it: windowed
   * layers attend to their window only (and keep only its KV).
   */
  readonly contextLength: number;
  /** Token ids that end generation: config.json / generation_config.json EOS plus the tokenizer's. */
  readonly stopTokenIds: readonly number[];
  /**
   * Tokens a request that names no maximum gets: generation_config.json's `max_new_tokens`
   * (the model's own answer length, as vLLM reads it), else 512 — cut to the room the prompt
   * leaves (`completionBudget`).
   */
  readonly defaultMaxTokens: number;
  /** The model's natural end (generation_config.json's `meshnet_natural_end`), resolved to token ids. */
  readonly naturalEnd?: NaturalEnd;
}

/**
 * An unconstrained answer ends (`stop`) right after a token of `tokenIds` once it holds
 * `minTokens` tokens; unlike a stop token, that token is part of the answer.
 */
export interface NaturalEnd {
  readonly minTokens: number;
  readonly tokenIds: readonly number[];
}

/**
 * `naturalEnd` of `config` as token ids: every id below `vocabSize` whose text (`decode`, special
 * tokens skipped) ends with one of its strings. Undefined when the model has none (or no token
 * qualifies).
 */
export function naturalEndTokens(config: Pick<ModelConfig, 'naturalEnd'>, vocabSize: number, decode: (id: number) => string): NaturalEnd | undefined {
  const end = config.naturalEnd;
  if (end === undefined) return undefined;
  const tokenIds: number[] = [];
  for (let id = 0; id < vocabSize; id++) {
    const text = decode(id);
    if (text !== '' && end.endsWith.some((s) => text.endsWith(s))) tokenIds.push(id);
  }
  return tokenIds.length === 0 ? undefined : { minTokens: end.minNewTokens, tokenIds };
}

/** The default answer length of a model whose generation_config.json names none (llama.cpp's server and vLLM cap similarly). */
export const FALLBACK_MAX_TOKENS = 512;

export function generationLimits(
  config: Pick<ModelConfig, 'maxPositionEmbeddings' | 'eosTokenIds' | 'maxNewTokens'>,
  tokenizer?: { readonly specialTokens: { readonly eosIds: readonly number[] } },
  naturalEnd?: NaturalEnd,
): GenerationLimits {
  const contextLength = rotaryPositions(config);
  return {
    contextLength,
    stopTokenIds: Object.freeze([...new Set([...config.eosTokenIds, ...(tokenizer?.specialTokens.eosIds ?? [])])]),
    defaultMaxTokens: Math.min(config.maxNewTokens ?? FALLBACK_MAX_TOKENS, contextLength),
    ...(naturalEnd ? { naturalEnd } : {}),
  };
}

/**
 * A prompt plus the tokens asked for does not fit the context. `requestedTokens` is absent
 * when the prompt alone leaves no room for one token. Mapped to HTTP once, at the edge
 * (400 `context_length_exceeded`).
 */
export class ContextLengthError extends Error {
  override readonly name = 'ContextLengthError';
  readonly code = 'context_length_exceeded';
  constructor(
    readonly contextLength: number,
    readonly promptTokens: number,
    readonly requestedTokens?: number,
  ) {
    super(
      requestedTokens === undefined
        ? `the prompt's ${promptTokens} tokens leave no room in the context of ${contextLength}`
        : `prompt + max tokens (${promptTokens} + ${requestedTokens} = ${promptTokens + requestedTokens}) exceed the context of ${contextLength}`,
    );
  }
}

/**
 * The token budget of one request. A requested `maxTokens` must fit beside the prompt; the
 * default (`defaultMaxTokens`, e.g. 512) is cut to what is left. Throws ContextLengthError.
 */
export function completionBudget(limits: GenerationLimits, promptTokens: number, maxTokens: number | undefined, defaultMaxTokens: number): number {
  const left = limits.contextLength - promptTokens;
  if (left < 1) throw new ContextLengthError(limits.contextLength, promptTokens);
  if (maxTokens === undefined) return Math.min(defaultMaxTokens, left);
  if (maxTokens > left) throw new ContextLengthError(limits.contextLength, promptTokens, maxTokens);
  return maxTokens;
}
