/**
 * OpenAI request bodies → typed, validated requests for the head worker.
 *
 * `parseChatRequest` (POST /v1/chat/completions) and `parseCompletionRequest`
 * (POST /v1/completions) check every field they use with OpenAI's wording and refuse, with a
 * 400 naming the param, what this server cannot honour (n > 1, non-text content, legacy
 * `functions`, several prompts, …) instead of silently answering something else. Fields they do not know
 * are ignored. The sampling values they return are already within `validateSamplingParams`'
 * ranges; the caller adds `stopTokenIds` (the model's EOS) and validates the whole.
 */
import type { ResponseFormat } from '../../core/model/structured-output.ts';
import type { ChatMessage } from '../../core/model/tokenizer.ts';
import type { ToolRequest } from '../../core/model/tools/tool-types.ts';
import type { SamplingParams } from '../../core/sampling/params.ts';
import { isSpeculateMode, SPECULATE_MODES, type SpeculateMode } from '../../core/speculation/drafter.ts';
import { type ApiError, invalidRequest, modelNotFound } from './errors.ts';
import {
  BodyFields,
  booleanValue,
  describeType,
  invalidValue,
  isRecord,
  missingParam,
  stringValue,
  typeError,
} from './request-fields.ts';
import { parseMessages, parsePrompt } from './request-inputs.ts';
import { parseResponseFormat, parseTools } from './request-output.ts';

/** Largest `stop` array (OpenAI's limit). */
export const MAX_STOP_STRINGS = 4;
/** Largest completions `logprobs` (OpenAI's limit). */
export const MAX_COMPLETION_LOGPROBS = 5;
/** Largest chat `top_logprobs` (OpenAI's limit, = MAX_TOP_LOGPROBS of the sampler). */
export const MAX_CHAT_TOP_LOGPROBS = 20;

/** What the parser needs from the served model. */
export interface RequestDefaults {
  /** When given, prompt token ids must be below it. */
  readonly vocabSize?: number;
  /** When given, image parts are refused with this reason (a vision checkpoint served as text: `imageRefusal`). */
  readonly imageRefusal?: string;
}

/**
 * Sampling fields a request set; `maxTokens` only when it set max_tokens (or
 * max_completion_tokens): otherwise the model's default applies, decided in core.
 */
export type RequestSampling = Partial<SamplingParams>;

interface ParsedRequestBase {
  /** Equals the served model. */
  readonly model: string;
  readonly sampling: RequestSampling;
  /** Text that ends generation (OpenAI `stop`), never sent to the client. */
  readonly stopStrings: string[];
  readonly stream: boolean;
  /** `stream_options.include_usage`: a last chunk carries usage (streaming only). */
  readonly includeUsage: boolean;
  /** Report logprobs of the chosen tokens. */
  readonly logprobs: boolean;
  /** Alternatives reported per token (0 when `logprobs` is false). */
  readonly topLogprobs: number;
  /** OpenAI `user`: an end-user id, for logs only. */
  readonly user?: string;
  /** The `speculate` extension: how this request drafts (default: the server's `--speculate`). */
  readonly speculate?: SpeculateMode;
}

export interface ChatRequest extends ParsedRequestBase {
  readonly kind: 'chat';
  readonly messages: ChatMessage[];
  /** `response_format`; undefined or `text` for free text. */
  readonly responseFormat?: ResponseFormat;
  /** `tools` with `tool_choice` and `parallel_tool_calls`; undefined without tools. */
  readonly tools?: ToolRequest;
}

export interface CompletionRequest extends ParsedRequestBase {
  readonly kind: 'completion';
  /** Text to tokenize, or token ids used as given. */
  readonly prompt: string | number[];
}

export type OpenAIRequest = ChatRequest | CompletionRequest;

/** Parses a `/v1/chat/completions` body (chat has no token-id prompts: of `defaults` only `imageRefusal` applies). Throws ApiError (400, or 404 model_not_found). */
export function parseChatRequest(body: unknown, servedModel: string, defaults: RequestDefaults = {}): ChatRequest {
  const fields = readBody(body, servedModel);
  refuseUnsupported(fields, 'chat');
  const messages = parseMessages(fields.get('messages'), defaults.imageRefusal);
  const logprobs = fields.boolean('logprobs') ?? false;
  const topLogprobs = fields.integer('top_logprobs', { min: 0, max: MAX_CHAT_TOP_LOGPROBS }) ?? 0;
  if (topLogprobs > 0 && !logprobs) {
    throw invalidValue('top_logprobs', "'logprobs' must be set to true when 'top_logprobs' is used.");
  }
  // Chat prefers the newer name; max_tokens is its deprecated alias.
  const maxCompletion = fields.integer('max_completion_tokens', { min: 1 });
  const maxTokens = maxCompletion ?? fields.integer('max_tokens', { min: 1 });
  const responseFormat = parseResponseFormat(fields.get('response_format'));
  const tools = parseTools(fields);
  return {
    kind: 'chat',
    messages,
    ...(responseFormat === undefined || responseFormat.type === 'text' ? {} : { responseFormat }),
    ...(tools === undefined ? {} : { tools }),
    ...common(fields, maxTokens, logprobs, topLogprobs),
  };
}

/** Parses a `/v1/completions` body. Throws ApiError (400, or 404 model_not_found). */
export function parseCompletionRequest(
  body: unknown,
  servedModel: string,
  defaults: RequestDefaults,
): CompletionRequest {
  const fields = readBody(body, servedModel);
  refuseUnsupported(fields, 'completion');
  const prompt = parsePrompt(fields.get('prompt'), defaults.vocabSize);
  // Legacy completions: `logprobs: N` asks for the chosen token plus N alternatives.
  const topN = fields.integer('logprobs', { min: 0, max: MAX_COMPLETION_LOGPROBS });
  const maxTokens = fields.integer('max_tokens', { min: 1 });
  return {
    kind: 'completion',
    prompt,
    ...common(fields, maxTokens, topN !== undefined, topN ?? 0),
  };
}

/** The body as fields, after checking it is an object naming the served model (shared with /v1/responses). */
export function readBody(body: unknown, servedModel: string): BodyFields {
  if (!isRecord(body)) {
    throw invalidRequest(
      `Invalid request body: expected a JSON object, but got ${describeType(body)} instead.`,
      null,
      'invalid_type',
    );
  }
  if (body.model === undefined || body.model === null) throw missingParam('model');
  const model = stringValue('model', body.model);
  if (model !== servedModel) throw modelNotFound(model);
  return new BodyFields(body);
}

function common(
  fields: BodyFields,
  maxTokens: number | undefined,
  logprobs: boolean,
  topLogprobs: number,
): ParsedRequestBase {
  const n = fields.integer('n', { min: 1 });
  if (n !== undefined && n > 1) {
    throw invalidRequest(
      `Invalid 'n': this server generates one choice per request, but got n=${n}. Send ${n} requests instead.`,
      'n',
      'unsupported_value',
    );
  }
  const stream = fields.boolean('stream') ?? false;
  const includeUsage = parseStreamOptions(fields.get('stream_options'), stream);
  const user = fields.string('user');
  const sampling = samplingFields(fields);
  return {
    model: stringValue('model', fields.get('model')),
    sampling: {
      ...sampling,
      ...(maxTokens === undefined ? {} : { maxTokens }),
      ...(logprobs ? { logprobs, topLogprobs } : {}),
    },
    stopStrings: parseStop(fields.get('stop')),
    stream,
    includeUsage,
    logprobs,
    topLogprobs,
    ...(user === undefined ? {} : { user }),
    ...speculateField(fields),
  };
}

/** The `speculate` extension field ('off' | 'ngram' | 'draft', like `top_k` a meshnet extension; shared with /v1/responses). */
export function speculateField(fields: BodyFields): { speculate?: SpeculateMode } {
  const value = fields.string('speculate');
  if (value === undefined) return {};
  if (!isSpeculateMode(value)) throw invalidValue('speculate', `expected one of ${SPECULATE_MODES.map((m) => `'${m}'`).join(', ')}.`);
  return { speculate: value };
}

/** OpenAI's sampling fields, plus top_k / min_p / repetition_penalty as vLLM accepts them (shared with /v1/responses). */
export function samplingFields(fields: BodyFields): Partial<SamplingParams> {
  const out: { -readonly [K in keyof SamplingParams]?: SamplingParams[K] } = {};
  const set = <K extends keyof SamplingParams>(key: K, value: SamplingParams[K] | undefined) => {
    if (value !== undefined) out[key] = value;
  };
  set('temperature', fields.number('temperature', { min: 0, max: 2 }));
  set('topP', fields.number('top_p', { min: 0, minExclusive: true, max: 1 }));
  set('presencePenalty', fields.number('presence_penalty', { min: -2, max: 2 }));
  set('frequencyPenalty', fields.number('frequency_penalty', { min: -2, max: 2 }));
  set('seed', fields.integer('seed'));
  // vLLM spells "top-k off" as -1; the sampler spells it 0.
  const topK = fields.integer('top_k', { min: -1 });
  set('topK', topK === -1 ? 0 : topK);
  set('minP', fields.number('min_p', { min: 0, max: 1 }));
  set('repetitionPenalty', fields.number('repetition_penalty', { min: 0, minExclusive: true }));
  return out;
}

function parseStop(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  const strings = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(strings)) throw typeError('stop', 'one of a string or an array of strings', value);
  if (strings.length > MAX_STOP_STRINGS) {
    throw invalidRequest(
      `Invalid 'stop': array too long. Expected an array with maximum length ${MAX_STOP_STRINGS}, but got an array with length ${strings.length} instead.`,
      'stop',
      'array_above_max_length',
    );
  }
  return strings.map((s: unknown, i) => {
    const param = typeof value === 'string' ? 'stop' : `stop[${i}]`;
    const text = stringValue(param, s);
    if (text.length === 0) throw invalidValue(param, 'stop strings must not be empty.');
    return text;
  });
}

function parseStreamOptions(value: unknown, stream: boolean): boolean {
  if (value === undefined || value === null) return false;
  if (!stream) {
    throw invalidRequest("The 'stream_options' parameter is only allowed when 'stream' is enabled.", 'stream_options', 'invalid_value');
  }
  if (!isRecord(value)) throw typeError('stream_options', 'an object', value);
  const includeUsage = value.include_usage;
  if (includeUsage === undefined || includeUsage === null) return false;
  return booleanValue('stream_options.include_usage', includeUsage);
}

/**
 * OpenAI fields that would change the answer and that this server cannot honour: refused
 * rather than ignored, so a client never gets a silently different result.
 */
function refuseUnsupported(fields: BodyFields, kind: 'chat' | 'completion'): void {
  const refuse = (param: string, why: string): ApiError =>
    invalidRequest(`Unsupported parameter: '${param}' ${why}`, param, 'unsupported_parameter');
  const nonEmpty = (v: unknown) => v !== undefined && !(Array.isArray(v) && v.length === 0) && !(isRecord(v) && Object.keys(v).length === 0);
  if (nonEmpty(fields.get('logit_bias'))) throw refuse('logit_bias', 'is not supported by this server.');
  if (kind === 'chat') {
    // The deprecated function-calling fields: answered with `tools` / `tool_choice` instead.
    if (nonEmpty(fields.get('functions'))) throw refuse('functions', "is deprecated and not supported: send 'tools' instead.");
    refuseOutputModalities(fields);
    const legacyChoice = fields.get('function_call');
    if (legacyChoice !== undefined && legacyChoice !== 'none' && legacyChoice !== 'auto') {
      throw refuse('function_call', "is deprecated and not supported: send 'tool_choice' instead.");
    }
  } else {
    if (fields.get('echo') !== undefined && fields.get('echo') !== false) throw refuse('echo', 'is not supported by this server.');
    const bestOf = fields.get('best_of');
    if (bestOf !== undefined && bestOf !== 1) throw refuse('best_of', 'is not supported: this server generates one choice per request.');
    const suffix = fields.get('suffix');
    if (suffix !== undefined && suffix !== '') throw refuse('suffix', 'is not supported by this server.');
  }
}

/** Chat `modalities`: only `['text']` (this model writes text); `audio` output is refused too. */
function refuseOutputModalities(fields: BodyFields): void {
  const modalities = fields.get('modalities');
  if (modalities !== undefined) {
    if (!Array.isArray(modalities)) throw typeError('modalities', 'an array of strings', modalities);
    modalities.forEach((m: unknown, i) => {
      const modality = stringValue(`modalities[${i}]`, m);
      if (modality !== 'text') {
        throw invalidRequest(
          `Unsupported value: 'modalities' does not support '${modality.slice(0, 64)}' with this model. Supported values are: 'text'.`,
          'modalities',
          'unsupported_value',
        );
      }
    });
  }
  if (fields.get('audio') !== undefined) {
    throw invalidRequest("Unsupported parameter: 'audio' is not supported: this model answers in text only.", 'audio', 'unsupported_parameter');
  }
}
