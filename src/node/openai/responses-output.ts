/**
 * The `Response` object of `POST /v1/responses`, shaped like api.openai.com's: its settings
 * echoed, `output` items — assistant `message`s with `output_text` parts and `function_call`s
 * (`call_id`, `name`, `arguments`) in the order the model wrote them — and `usage` with
 * details. Pure builders over plain data; the stream builder (`responses-stream.ts`) assembles
 * them, and a whole response is that builder's last object, so both end the same.
 *
 * Finish reasons: `stop` → status `completed`; `length` (max_output_tokens, or the context
 * running out) → status `incomplete` with `incomplete_details.reason: 'max_output_tokens'`,
 * and the item being written then `incomplete` too.
 */
import type { Usage } from '../../core/route/route-types.ts';
import type { FinishReason } from '../../core/sampling/index.ts';
import type { ApiError } from './errors.ts';
import { chatLogprobs, type ChosenToken, type ResponseMeta, type TokenText } from './responses.ts';
import type { ToolCallStream } from '../../core/model/tools/tool-call-stream.ts';
import type { ResponseEcho } from './responses-echo.ts';
import type { ToolCall } from '../../core/model/tools/tool-types.ts';

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed';

export interface ResponseTopLogprob {
  readonly token: string;
  readonly logprob: number;
  readonly bytes: number[];
}

export interface ResponseLogprob extends ResponseTopLogprob {
  readonly top_logprobs: ResponseTopLogprob[];
}

export interface OutputText {
  readonly type: 'output_text';
  readonly text: string;
  readonly annotations: [];
  readonly logprobs: ResponseLogprob[];
}

export interface OutputMessage {
  readonly id: string;
  readonly type: 'message';
  readonly status: 'in_progress' | 'completed' | 'incomplete';
  readonly role: 'assistant';
  readonly content: OutputText[];
}

/** A call the model made (`FunctionToolCall`); `id` is the item's, `call_id` the call's. */
export interface FunctionCallItem {
  readonly id: string;
  readonly type: 'function_call';
  readonly status: 'in_progress' | 'completed' | 'incomplete';
  readonly arguments: string;
  readonly call_id: string;
  readonly name: string;
}

export type OutputItem = OutputMessage | FunctionCallItem;

export interface ResponseUsage {
  readonly input_tokens: number;
  readonly input_tokens_details: { readonly cached_tokens: number; readonly cache_write_tokens: number };
  readonly output_tokens: number;
  readonly output_tokens_details: { readonly reasoning_tokens: number };
  readonly total_tokens: number;
}

/** The `Response` object (key order as api.openai.com sends it). */
export interface ResponseObject {
  readonly id: string;
  readonly object: 'response';
  readonly created_at: number;
  readonly status: ResponseStatus;
  readonly background: false;
  readonly completed_at: number | null;
  readonly error: { readonly code: 'server_error' | 'rate_limit_exceeded'; readonly message: string } | null;
  readonly incomplete_details: { readonly reason: 'max_output_tokens' } | null;
  readonly instructions: string | null;
  readonly max_output_tokens: number | null;
  readonly max_tool_calls: null;
  readonly model: string;
  readonly output: OutputItem[];
  readonly parallel_tool_calls: boolean;
  readonly previous_response_id: null;
  readonly prompt_cache_key: string | null;
  readonly reasoning: { readonly effort: null; readonly summary: null };
  readonly safety_identifier: string | null;
  readonly service_tier: 'default';
  readonly temperature: number;
  readonly text: { readonly format: ResponseEcho['textFormat']; readonly verbosity: ResponseEcho['verbosity'] };
  readonly tool_choice: ResponseEcho['toolChoice'];
  readonly tools: ResponseEcho['tools'];
  readonly top_logprobs: number;
  readonly top_p: number;
  readonly truncation: ResponseEcho['truncation'];
  readonly usage?: ResponseUsage;
  readonly user?: string;
  readonly metadata: Readonly<Record<string, string>>;
}

/** What one response's objects share: ids, time, model, and the echoed request. */
export interface ResponseContext {
  /** `id` is `resp_<hex>`; `created` unix seconds. */
  readonly meta: ResponseMeta;
  readonly echo: ResponseEcho;
  /** Names tokens for logprobs (only read when logprobs were asked for). */
  readonly tokenText: TokenText;
  readonly logprobs: boolean;
  /** Reads tool calls out of the answer (one reader per response); absent without tools. */
  readonly tools?: ToolCallStream;
}

/**
 * An output item's id, named after the response id: `msg_<hex>` for a message, `fc_<hex>` for
 * a call, and `_<n>` after it for the item at output index n > 0.
 */
export function itemId(responseId: string, kind: 'msg' | 'fc', outputIndex = 0): string {
  return `${kind}_${responseId.replace(/^resp_/, '')}${outputIndex === 0 ? '' : `_${outputIndex}`}`;
}

export function responseUsage(usage: Usage): ResponseUsage {
  return {
    input_tokens: usage.promptTokens,
    input_tokens_details: { cached_tokens: usage.cachedTokens ?? 0, cache_write_tokens: 0 },
    output_tokens: usage.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

/** Responses logprobs of chosen tokens: chat's, with the alternatives under `top_logprobs`. */
export function responseLogprobs(tokens: readonly ChosenToken[], tokenText: TokenText): ResponseLogprob[] {
  return chatLogprobs(tokens, tokenText).content;
}

/** A stream event's logprob (`ResponseLogProb`): as a part's, without `bytes`. */
export interface StreamLogprob {
  readonly token: string;
  readonly logprob: number;
  readonly top_logprobs: { readonly token: string; readonly logprob: number }[];
}

/** The delta / done events' form of part logprobs (the spec gives them no `bytes`). */
export function streamLogprobs(logprobs: readonly ResponseLogprob[]): StreamLogprob[] {
  return logprobs.map((l) => ({ token: l.token, logprob: l.logprob, top_logprobs: l.top_logprobs.map((t) => ({ token: t.token, logprob: t.logprob })) }));
}

export function outputText(text: string, logprobs: ResponseLogprob[] = []): OutputText {
  return { type: 'output_text', text, annotations: [], logprobs };
}

export function outputMessage(id: string, status: OutputMessage['status'], content: OutputText[]): OutputMessage {
  return { id, type: 'message', status, role: 'assistant', content };
}

export function functionCallItem(id: string, status: FunctionCallItem['status'], call: ToolCall): FunctionCallItem {
  return { id, type: 'function_call', status, arguments: call.arguments, call_id: call.id, name: call.name };
}

/** Response status and incomplete_details for a finish reason. */
export function finishStatus(finishReason: FinishReason): Pick<ResponseObject, 'status' | 'incomplete_details'> {
  return finishReason === 'length' ? { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } } : { status: 'completed', incomplete_details: null };
}

/** The Response object in any state; `usage` and `completedAt` only once it ended. */
export function responseObject(
  ctx: ResponseContext,
  state: {
    readonly status: ResponseStatus;
    readonly output: OutputItem[];
    readonly incompleteDetails?: ResponseObject['incomplete_details'];
    readonly error?: ApiError;
    readonly usage?: Usage;
    readonly completedAt?: number;
  },
): ResponseObject {
  const { meta, echo } = ctx;
  return {
    id: meta.id,
    object: 'response',
    created_at: meta.created,
    status: state.status,
    background: false,
    completed_at: state.status === 'completed' ? (state.completedAt ?? null) : null,
    error: state.error ? { code: state.error.status === 429 ? 'rate_limit_exceeded' : 'server_error', message: state.error.message } : null,
    incomplete_details: state.incompleteDetails ?? null,
    instructions: echo.instructions,
    max_output_tokens: echo.maxOutputTokens,
    max_tool_calls: null,
    model: meta.model,
    output: state.output,
    parallel_tool_calls: echo.parallelToolCalls,
    previous_response_id: null,
    prompt_cache_key: echo.promptCacheKey,
    reasoning: { effort: null, summary: null },
    safety_identifier: echo.safetyIdentifier,
    service_tier: 'default',
    temperature: echo.temperature,
    text: { format: echo.textFormat, verbosity: echo.verbosity },
    tool_choice: echo.toolChoice,
    tools: echo.tools,
    top_logprobs: echo.topLogprobs,
    top_p: echo.topP,
    truncation: echo.truncation,
    ...(state.usage ? { usage: responseUsage(state.usage) } : {}),
    ...(echo.user === undefined ? {} : { user: echo.user }),
    metadata: echo.metadata,
  };
}
