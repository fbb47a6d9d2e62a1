/**
 * Sampling parameters: the plain-data description of how the next token is chosen, its
 * defaults, and the one validator every entry point (HTTP edge, CLI, tests) goes through.
 */

/** Largest `topLogprobs` accepted (the OpenAI limit). */
export const MAX_TOP_LOGPROBS = 20;

/**
 * How to turn logits into tokens. Each "off" value leaves the distribution untouched.
 * Pipeline order (see `Sampler`): penalties → temperature → top-k → softmax → top-p → min-p.
 */
export interface SamplingParams {
  /** Divides logits; 0 means greedy (argmax, ties to the lowest id). ≥ 0. */
  readonly temperature: number;
  /** Keep only the `topK` most likely tokens; 0 = off. Integer ≥ 0. */
  readonly topK: number;
  /** Keep the smallest most-likely set whose probability reaches `topP`; 1 = off. In (0, 1]. */
  readonly topP: number;
  /** Drop tokens with probability < minP × (top probability); 0 = off. In [0, 1]. */
  readonly minP: number;
  /**
   * HF / llama.cpp repetition penalty over every distinct token in prompt + generated:
   * positive logits are divided by it, negative ones multiplied. 1 = off. > 0.
   */
  readonly repetitionPenalty: number;
  /** OpenAI presence penalty: subtracted once from each token generated so far. In [-2, 2]. */
  readonly presencePenalty: number;
  /** OpenAI frequency penalty: subtracted once per occurrence in generated tokens. In [-2, 2]. */
  readonly frequencyPenalty: number;
  /** RNG seed (safe integer). Undefined: the sampler picks a random one. */
  readonly seed?: number;
  /** Upper bound on generated tokens. Integer ≥ 1. */
  readonly maxTokens: number;
  /** Token ids that end generation (finish reason 'stop'); the stop token is not emitted. */
  readonly stopTokenIds: readonly number[];
  /** Report the chosen token's log-probability alongside `topLogprobs` alternatives. */
  readonly logprobs: boolean;
  /** Number of alternatives to report, 0..20; > 0 requires `logprobs: true`. */
  readonly topLogprobs: number;
}

/** Defaults: plain multinomial sampling at temperature 1, at most 256 tokens. */
export const defaultSamplingParams: SamplingParams = Object.freeze({
  temperature: 1,
  topK: 0,
  topP: 1,
  minP: 0,
  repetitionPenalty: 1,
  presencePenalty: 0,
  frequencyPenalty: 0,
  maxTokens: 256,
  stopTokenIds: Object.freeze([]) as readonly number[],
  logprobs: false,
  topLogprobs: 0,
});

/** A refused sampling value. `field` names the offending parameter, `reason` says what is allowed. */
export class SamplingParamError extends Error {
  override readonly name = 'SamplingParamError';
  readonly code = 'invalid_sampling_param';
  readonly field: string;
  readonly reason: string;

  constructor(field: string, reason: string) {
    super(`invalid sampling parameter '${field}': ${reason}`);
    this.field = field;
    this.reason = reason;
  }
}

const KNOWN_FIELDS: ReadonlySet<string> = new Set([
  'temperature', 'topK', 'topP', 'minP', 'repetitionPenalty', 'presencePenalty',
  'frequencyPenalty', 'seed', 'maxTokens', 'stopTokenIds', 'logprobs', 'topLogprobs',
]);

function finite(field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new SamplingParamError(field, `must be a finite number, got ${String(value)}`);
  }
  return value;
}

function integer(field: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = finite(field, value);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new SamplingParamError(field, `must be an integer in [${min}, ${max}], got ${n}`);
  }
  return n;
}

function inRange(field: string, value: unknown, low: number, high: number, lowOpen = false): number {
  const n = finite(field, value);
  if (n > high || n < low || (lowOpen && n === low)) {
    throw new SamplingParamError(field, `must be in ${lowOpen ? '(' : '['}${low}, ${high}], got ${n}`);
  }
  return n;
}

/**
 * Fills missing (or undefined) fields from {@link defaultSamplingParams}, checks every field's type
 * and range, and returns a new frozen object. Unknown keys are refused too, so a typo such as
 * `top_k` fails loudly instead of silently sampling with defaults. Throws {@link SamplingParamError}.
 * Idempotent: validating an already valid object returns an equal one.
 */
export function validateSamplingParams(input: Partial<SamplingParams>): SamplingParams {
  if (typeof input !== 'object' || input === null) {
    throw new SamplingParamError('params', 'must be an object');
  }
  for (const key of Object.keys(input)) {
    if (!KNOWN_FIELDS.has(key)) throw new SamplingParamError(key, 'unknown sampling parameter');
  }
  const get = <K extends keyof SamplingParams>(key: K): unknown =>
    input[key] === undefined ? defaultSamplingParams[key] : input[key];

  const stopTokenIds = get('stopTokenIds');
  if (!Array.isArray(stopTokenIds)) {
    throw new SamplingParamError('stopTokenIds', 'must be an array of token ids');
  }
  const logprobs = get('logprobs');
  if (typeof logprobs !== 'boolean') {
    throw new SamplingParamError('logprobs', `must be a boolean, got ${String(logprobs)}`);
  }
  const topLogprobs = integer('topLogprobs', get('topLogprobs'), 0, MAX_TOP_LOGPROBS);
  if (topLogprobs > 0 && !logprobs) {
    throw new SamplingParamError('topLogprobs', 'requires logprobs: true');
  }
  const seed = input.seed === undefined ? undefined : integer('seed', input.seed, Number.MIN_SAFE_INTEGER);

  return Object.freeze({
    temperature: inRange('temperature', get('temperature'), 0, Number.MAX_VALUE),
    topK: integer('topK', get('topK'), 0),
    topP: inRange('topP', get('topP'), 0, 1, true),
    minP: inRange('minP', get('minP'), 0, 1),
    repetitionPenalty: inRange('repetitionPenalty', get('repetitionPenalty'), 0, Number.MAX_VALUE, true),
    presencePenalty: inRange('presencePenalty', get('presencePenalty'), -2, 2),
    frequencyPenalty: inRange('frequencyPenalty', get('frequencyPenalty'), -2, 2),
    ...(seed === undefined ? {} : { seed }),
    maxTokens: integer('maxTokens', get('maxTokens'), 1),
    stopTokenIds: Object.freeze(
      stopTokenIds.map((id: unknown, i: number) => integer(`stopTokenIds[${i}]`, id, 0)),
    ),
    logprobs,
    topLogprobs,
  });
}

/**
 * Whether sampling with `params` (validated) and no mask is one argmax pass over the logits —
 * no copy, no RNG draw, no state — which is cheaper where the logits already are than any
 * hand-over (see sequence-sampler.ts).
 */
export function isPlainGreedy(params: SamplingParams): boolean {
  return params.temperature === 0 && !params.logprobs && params.repetitionPenalty === 1 && params.presencePenalty === 0 && params.frequencyPenalty === 0;
}
