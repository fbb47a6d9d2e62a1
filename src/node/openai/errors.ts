/**
 * The OpenAI error shape and the one place engine errors become HTTP errors.
 *
 * Every refusal the OpenAI edge makes is an {@link ApiError}; `toErrorBody` turns it into
 * exactly what api.openai.com sends: `{ error: { message, type, param, code } }`. Engine
 * errors (sampling, route, template) are typed in core and mapped here once, by `mapError`.
 * No h3 import: the routes that set the status and write the body live elsewhere.
 */
import { ContextLengthError } from '../../core/model/generation-limits.ts';
import { TokenizerError } from '../../core/model/tokenizer-error.ts';
import { PlanError, RouteUnavailableError } from '../../core/mesh/plan-error.ts';
import { AnswerFormatError, EmptyPromptError, PeerWaitError, SessionLimitError, ShuttingDownError } from '../../core/route/route-errors.ts';
import { ConstraintDeadEndError } from '../../core/sampling/constraint.ts';
import { SamplingParamError } from '../../core/sampling/params.ts';
import { SpeculationUnavailableError } from '../../core/speculation/drafters.ts';

/** OpenAI `error.type` values this server sends. */
export type ApiErrorType = 'invalid_request_error' | 'requests' | 'server_error';

/** The JSON body of every error response. */
export interface ErrorBody {
  readonly error: {
    readonly message: string;
    readonly type: ApiErrorType;
    readonly param: string | null;
    readonly code: string | null;
  };
}

/**
 * A refusal with its HTTP status. `param` names the request field at fault (OpenAI style,
 * e.g. `messages[0].content`), `code` is OpenAI's machine-readable code. `retryAfterSeconds`,
 * when set, is meant for a `Retry-After` header (429, 503). `cause` keeps the engine error
 * for logs; it never reaches the client.
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly status: number;
  readonly type: ApiErrorType;
  readonly param: string | null;
  readonly code: string | null;
  readonly retryAfterSeconds?: number;
  /** The answer ends the connection (the rest of the request body is not read). */
  readonly closesConnection: boolean;

  constructor(
    status: number,
    message: string,
    fields: {
      type: ApiErrorType;
      param?: string | null;
      code?: string | null;
      retryAfterSeconds?: number;
      closesConnection?: boolean;
      cause?: unknown;
    },
  ) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.status = status;
    this.type = fields.type;
    this.param = fields.param ?? null;
    this.code = fields.code ?? null;
    if (fields.retryAfterSeconds !== undefined) this.retryAfterSeconds = fields.retryAfterSeconds;
    this.closesConnection = fields.closesConnection ?? false;
  }
}

/** The longest `message` (and `param`) an error body carries; past it the text is cut with `…`. */
export const MAX_ERROR_MESSAGE = 2048;
export const MAX_ERROR_PARAM = 256;

/** A client's value as a message quotes it: at most 64 characters, then `…` (a 3 MiB model name is not echoed back). */
export function quoted(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}

const capped = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…` : text);

/**
 * `{ error: { message, type, param, code } }` — exactly these four keys. Message and param are
 * capped (MAX_ERROR_MESSAGE, MAX_ERROR_PARAM) whatever a refusal quoted: the builders quote
 * client values short (`quoted`), and this is the backstop.
 */
export function toErrorBody(err: ApiError): ErrorBody {
  return { error: { message: capped(err.message, MAX_ERROR_MESSAGE), type: err.type, param: err.param === null ? null : capped(err.param, MAX_ERROR_PARAM), code: err.code } };
}

/** 400: the request is malformed. `param` names the field, `code` is e.g. `invalid_type`. */
export function invalidRequest(message: string, param: string | null = null, code: string | null = null): ApiError {
  return new ApiError(400, message, { type: 'invalid_request_error', param, code });
}

/** 400: the body is not JSON (the h3 route catches the parse failure). */
export function invalidJsonBody(): ApiError {
  return invalidRequest(
    'We could not parse the JSON body of your request. The API expects a JSON payload, but what was sent was not valid JSON.',
    null,
    'invalid_json',
  );
}

/** 401: missing or wrong bearer key. The key itself is never echoed. */
export function unauthorized(message = 'Incorrect API key provided.'): ApiError {
  return new ApiError(401, message, { type: 'invalid_request_error', code: 'invalid_api_key' });
}

/** 404: the request names a model this head does not serve. */
export function modelNotFound(model: string): ApiError {
  return new ApiError(404, `The model '${quoted(model)}' does not exist or you do not have access to it.`, {
    type: 'invalid_request_error',
    param: 'model',
    code: 'model_not_found',
  });
}

/** 404: no route for this method and path (OpenAI: `Invalid URL (POST /v1/foo)`). */
export function unknownPath(method: string, path: string): ApiError {
  return new ApiError(404, `Invalid URL (${quoted(method.toUpperCase())} ${quoted(path)})`, { type: 'invalid_request_error' });
}

/** 405: the path exists but not for this method. */
export function methodNotAllowed(method: string, path: string): ApiError {
  return new ApiError(405, `Invalid method for URL (${quoted(method.toUpperCase())} ${quoted(path)})`, { type: 'invalid_request_error' });
}

/** 413: the body is larger than `limitBytes`. */
export function payloadTooLarge(limitBytes: number): ApiError {
  return new ApiError(413, `Request body too large: the limit is ${limitBytes} bytes.`, {
    type: 'invalid_request_error',
    code: 'request_too_large',
    closesConnection: true,
  });
}

/** 408: the request (its headers, or its whole body) did not arrive within `timeoutMs` (`--request-timeout`). */
export function requestTimeout(timeoutMs: number): ApiError {
  return new ApiError(408, `The request did not arrive in full within ${timeoutMs / 1000} s (--request-timeout).`, {
    type: 'invalid_request_error',
    code: 'request_timeout',
    closesConnection: true,
  });
}

/**
 * 499 (nginx's "client closed request"): the client went away before its request was read.
 * Nobody receives it; it exists so the request is counted as the client's abort, not a 500.
 */
export const CLIENT_CLOSED_REQUEST = 499;

export function clientClosedRequest(cause?: unknown): ApiError {
  return new ApiError(CLIENT_CLOSED_REQUEST, 'The client closed the connection before its request arrived in full.', {
    type: 'invalid_request_error',
    code: 'client_closed_request',
    closesConnection: true,
    cause,
  });
}

/** 429: too many requests, or too many concurrent sessions (say which in `message`). */
export function tooManyRequests(message: string, retryAfterSeconds?: number): ApiError {
  return new ApiError(429, message, {
    type: 'requests',
    code: 'rate_limit_exceeded',
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
  });
}

/** `Retry-After` of a 503: peers join (or a replacement loads its layers) within seconds. */
export const SERVICE_UNAVAILABLE_RETRY_SECONDS = 5;

/** 503: the mesh cannot serve the model now (no route); retry when peers join. Always carries a retry delay. */
export function serviceUnavailable(message: string, retryAfterSeconds = SERVICE_UNAVAILABLE_RETRY_SECONDS, cause?: unknown): ApiError {
  return new ApiError(503, message, { type: 'server_error', code: 'route_unavailable', cause, retryAfterSeconds });
}

/** 500 with a fixed message: internal details (messages, stacks, paths) stay in `cause`. */
export function internalError(cause?: unknown): ApiError {
  return new ApiError(500, 'The server had an error while processing your request.', { type: 'server_error', cause });
}

/** SamplingParams field → the OpenAI request field a client set. */
const SAMPLING_PARAM_NAMES: Readonly<Record<string, string>> = {
  temperature: 'temperature',
  topK: 'top_k',
  topP: 'top_p',
  minP: 'min_p',
  repetitionPenalty: 'repetition_penalty',
  presencePenalty: 'presence_penalty',
  frequencyPenalty: 'frequency_penalty',
  seed: 'seed',
  maxTokens: 'max_tokens',
  logprobs: 'logprobs',
  topLogprobs: 'top_logprobs',
};

/**
 * 400 `context_length_exceeded`, in OpenAI's words. `where` is the request field holding the
 * prompt: `messages` (chat) or `prompt` (completions).
 */
export function contextLengthExceeded(error: ContextLengthError, where: PromptParam): ApiError {
  const { contextLength, promptTokens, requestedTokens } = error;
  const message =
    requestedTokens === undefined
      ? `This model's maximum context length is ${contextLength} tokens. However, your ${where} resulted in ${promptTokens} tokens. Please reduce the length of the ${where}.`
      : `This model's maximum context length is ${contextLength} tokens. However, you requested ${promptTokens + requestedTokens} tokens (${promptTokens} in the ${where}, ${requestedTokens} in the completion). Please reduce the length of the ${where} or completion.`;
  return new ApiError(400, message, { type: 'invalid_request_error', param: where, code: 'context_length_exceeded', cause: error });
}

/** The request field holding the prompt: chat's `messages`, completions' `prompt`, Responses' `input`. */
export type PromptParam = 'messages' | 'prompt' | 'input';

/** What the request looked like, for errors whose wording depends on it. */
export interface ErrorContext {
  /** The request field holding the prompt (default `prompt`; a chat template's refusal names `messages` unless this is `input`). */
  readonly promptParam?: PromptParam;
  /** The request field holding the answer's format: chat's `response_format` (the default), Responses' `text.format`. */
  readonly formatParam?: 'response_format' | 'text.format';
}

/** 400 for an answer format or tool set the model cannot serve, naming the request's field. */
function answerFormatRefused(error: AnswerFormatError, context: ErrorContext): ApiError {
  const param = error.field === 'tools' ? 'tools' : (context.formatParam ?? 'response_format');
  const [message, code] =
    error.problem === 'invalid_schema'
      ? [`Invalid schema for '${param}': ${error.detail}`, 'invalid_schema']
      : error.problem === 'no_end_token'
        ? [`Unsupported parameter: '${param}': ${error.detail}.`, 'unsupported_parameter']
        : [`Unsupported value: '${param}' cannot be written by this model: ${error.detail}.`, 'unsupported_value'];
  return new ApiError(400, message, { type: 'invalid_request_error', param, code, cause: error });
}

/**
 * Maps anything thrown while serving a request to one ApiError:
 * ApiError → itself; ContextLengthError → 400 `context_length_exceeded` naming the prompt's
 * field; SessionLimitError → 429 (retry after 1 s); PeerWaitError (`--min-peers` not met in
 * time) and ShuttingDownError → 503; SamplingParamError → 400 naming the OpenAI param;
 * SpeculationUnavailableError (`speculate: 'draft'` without a draft model) → 400 `speculate`; a chat template that
 * refuses the conversation → 400 `messages`; RouteUnavailableError and PlanError
 * `route_unavailable` → 503; ConstraintDeadEndError (the vocabulary cannot continue the
 * output format) → 400; EmptyPromptError → 400 naming the prompt's field; AnswerFormatError
 * (a schema the grammar engine refuses, no end token, a vocabulary that cannot write the
 * format) → 400 naming `tools` or the format's field; anything else → 500 with a generic
 * message (the original is kept as `cause` for logs, never sent).
 */
export function mapError(error: unknown, context: ErrorContext = {}): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof AnswerFormatError) return answerFormatRefused(error, context);
  if (error instanceof EmptyPromptError) return new ApiError(400, 'The prompt is empty after tokenization.', { type: 'invalid_request_error', param: context.promptParam ?? 'prompt', cause: error });
  if (error instanceof ContextLengthError) return contextLengthExceeded(error, context.promptParam ?? 'prompt');
  if (error instanceof SessionLimitError) return tooManyRequests(error.message, 1);
  if (error instanceof PeerWaitError) return serviceUnavailable(error.message, undefined, error);
  if (error instanceof ShuttingDownError) return serviceUnavailable('The server is shutting down; retry in a moment.', undefined, error);
  if (error instanceof SamplingParamError) {
    const field = error.field.replace(/^(\w+)/, (name) => SAMPLING_PARAM_NAMES[name] ?? name);
    return new ApiError(400, `Invalid '${field}': ${error.reason}.`, {
      type: 'invalid_request_error',
      param: field,
      code: 'invalid_value',
      cause: error,
    });
  }
  if (error instanceof SpeculationUnavailableError) {
    return new ApiError(400, `Invalid 'speculate': ${error.message}.`, { type: 'invalid_request_error', param: 'speculate', code: 'invalid_value', cause: error });
  }
  if (error instanceof RouteUnavailableError || (error instanceof PlanError && error.code === 'route_unavailable')) {
    return serviceUnavailable(`The model cannot be served right now (${error.message}). Retry when more peers have joined.`, undefined, error);
  }
  // Why the prefix test: TokenizerError also reports broken tokenizer files (a server fault);
  // only a template that renders and then refuses the messages (raise_exception) is the client's.
  if (error instanceof TokenizerError && error.detail.startsWith('chat template failed to render')) {
    const where = context.promptParam === 'input' ? 'input' : 'messages';
    return new ApiError(400, `The model's chat template refused the ${where}: ${error.detail}`, {
      type: 'invalid_request_error',
      param: where,
      code: 'invalid_value',
      cause: error,
    });
  }
  if (error instanceof ConstraintDeadEndError) {
    return new ApiError(400, `The requested output format cannot be written by this model: ${error.message}.`, {
      type: 'invalid_request_error',
      param: null,
      code: 'unsupported_value',
      cause: error,
    });
  }
  return internalError(error);
}
