/**
 * Response objects shaped exactly like OpenAI's: `chat.completion`, `chat.completion.chunk`,
 * `text_completion` (whole and streamed), their logprobs, and the SSE framing. Pure builders
 * over plain data; the key order follows api.openai.com so bodies read the same.
 */
import type { Usage } from '../../core/route/route-types.ts';
import type { ToolCall } from '../../core/model/tools/tool-types.ts';
import type { FinishReason, TokenLogprob } from '../../core/sampling/index.ts';

/** Chat finish reasons: the sampler's, plus `tool_calls` when the answer ended in calls. */
export type ChatFinishReason = FinishReason | 'tool_calls';

/** One tool call in a message (`choices[0].message.tool_calls[i]`). */
export interface ChatToolCall {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}

/** One tool-call delta in a stream chunk: the first carries id, type and name. */
export interface ChatToolCallDelta {
  readonly index: number;
  readonly id?: string;
  readonly type?: 'function';
  readonly function: { readonly name?: string; readonly arguments: string };
}

/** The tool calls of a finished answer, as the message carries them. */
export function chatToolCalls(calls: readonly ToolCall[]): ChatToolCall[] {
  return calls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }));
}

/** One token id → its text (the tokenizer's decode of that id alone). */
export type TokenText = (tokenId: number) => string;

/** What every object of one response shares. */
export interface ResponseMeta {
  /** `chatcmpl-…` or `cmpl-…`, the same on every chunk (see {@link newResponseId}). */
  readonly id: string;
  /** Unix seconds, the same on every chunk. */
  readonly created: number;
  readonly model: string;
  /** Identifies the serving configuration (model, engine version). */
  readonly systemFingerprint: string;
}

/** A chosen token as the Route Session reports it (the `token` event's fields). */
export interface ChosenToken {
  readonly tokenId: number;
  /** Text the client was sent with this token (may be empty while a stop string could match). */
  readonly text: string;
  readonly logprob: number;
  readonly topLogprobs: readonly TokenLogprob[];
}

export interface OpenAIUsage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
  /** `cached_tokens`: prompt tokens whose KV came from a prefix entry (not prefilled again). */
  readonly prompt_tokens_details: { readonly cached_tokens: number };
}

export interface ChatTopLogprob {
  readonly token: string;
  readonly logprob: number;
  readonly bytes: number[];
}

export interface ChatLogprobEntry extends ChatTopLogprob {
  readonly top_logprobs: ChatTopLogprob[];
}

/** The spec requires both keys; this server never refuses, so `refusal` is always null. */
export interface ChatLogprobs {
  readonly content: ChatLogprobEntry[];
  readonly refusal: null;
}

export interface ChatCompletion {
  readonly id: string;
  readonly object: 'chat.completion';
  readonly created: number;
  readonly model: string;
  readonly choices: [
    {
      readonly index: 0;
      readonly message: {
        readonly role: 'assistant';
        /** Null when the answer is only tool calls. */
        readonly content: string | null;
        readonly refusal: null;
        readonly tool_calls?: ChatToolCall[];
      };
      readonly logprobs: ChatLogprobs | null;
      readonly finish_reason: ChatFinishReason;
    },
  ];
  readonly usage: OpenAIUsage;
  readonly system_fingerprint: string;
}

export interface ChatCompletionChunk {
  readonly id: string;
  readonly object: 'chat.completion.chunk';
  readonly created: number;
  readonly model: string;
  readonly system_fingerprint: string;
  /** One choice, or none on the usage chunk. */
  readonly choices: {
    readonly index: 0;
    readonly delta: { readonly role?: 'assistant'; readonly content?: string; readonly tool_calls?: ChatToolCallDelta[] };
    readonly logprobs: ChatLogprobs | null;
    readonly finish_reason: ChatFinishReason | null;
  }[];
  /** Present only with `include_usage`: null on every chunk but the last. */
  readonly usage?: OpenAIUsage | null;
}

export interface CompletionLogprobs {
  readonly tokens: string[];
  readonly token_logprobs: number[];
  readonly top_logprobs: Record<string, number>[];
  readonly text_offset: number[];
}

export interface TextCompletionChoice {
  readonly text: string;
  readonly index: 0;
  readonly logprobs: CompletionLogprobs | null;
  readonly finish_reason: FinishReason | null;
}

/** A whole text completion, or (with `finish_reason` null until the end) one stream chunk. */
export interface TextCompletion {
  readonly id: string;
  readonly object: 'text_completion';
  readonly created: number;
  readonly model: string;
  readonly system_fingerprint: string;
  readonly choices: TextCompletionChoice[];
  /**
   * Always on a whole completion; on chunks only the last one with `include_usage` (the spec's
   * `usage` is not nullable here, unlike chat chunks: other chunks leave the key out).
   */
  readonly usage?: OpenAIUsage;
}

/** `chatcmpl-<32 hex>` or `cmpl-<32 hex>`; `uuid` is injectable for tests. */
export function newResponseId(kind: 'chat' | 'completion', uuid: () => string = () => crypto.randomUUID()): string {
  return `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${uuid().replaceAll('-', '')}`;
}

/** Unix seconds for `created`. */
export function unixSeconds(ms: number = Date.now()): number {
  return Math.floor(ms / 1000);
}

export function toOpenAIUsage(usage: Usage): OpenAIUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens ?? 0 },
  };
}

const encoder = new TextEncoder();

/** OpenAI reports impossible tokens as -9999 (JSON has no -Infinity). */
function finiteLogprob(logprob: number): number {
  return Number.isFinite(logprob) ? logprob : -9999;
}

function chatTop(tokenId: number, logprob: number, tokenText: TokenText): ChatTopLogprob {
  const token = tokenText(tokenId);
  return { token, logprob: finiteLogprob(logprob), bytes: Array.from(encoder.encode(token)) };
}

/** Chat logprobs of chosen tokens: token text, logprob, UTF-8 bytes, and the alternatives. */
export function chatLogprobs(tokens: readonly ChosenToken[], tokenText: TokenText): ChatLogprobs {
  return {
    content: tokens.map((t) => ({
      ...chatTop(t.tokenId, t.logprob, tokenText),
      top_logprobs: t.topLogprobs.map((alt) => chatTop(alt.tokenId, alt.logprob, tokenText)),
    })),
    refusal: null,
  };
}

/**
 * Legacy completion logprobs. `top_logprobs[i]` maps the alternatives' texts to logprobs and
 * always holds the chosen token too (OpenAI: up to logprobs + 1 entries); when two ids decode
 * to the same text the more likely one is kept. `text_offset[i]` is where token i's text starts
 * in the completion text, counting from `startOffset` (UTF-16 units, like JS string indices).
 */
export function completionLogprobs(tokens: readonly ChosenToken[], tokenText: TokenText, startOffset = 0): CompletionLogprobs {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let offset = startOffset;
  for (const t of tokens) {
    const token = tokenText(t.tokenId);
    const top: Record<string, number> = {};
    for (const alt of [...t.topLogprobs, t]) {
      const text = tokenText(alt.tokenId);
      if (!Object.hasOwn(top, text)) top[text] = finiteLogprob(alt.logprob);
    }
    out.tokens.push(token);
    out.token_logprobs.push(finiteLogprob(t.logprob));
    out.top_logprobs.push(top);
    out.text_offset.push(offset);
    offset += t.text.length;
  }
  return out;
}

/** What a finished generation produced (see `collectGeneration`). */
export interface GenerationResult {
  readonly text: string;
  readonly finishReason: FinishReason;
  readonly usage: Usage;
  /** Every chosen token in order (their `text` joined is `text` minus the released tail). */
  readonly tokens: readonly ChosenToken[];
}

/** What the answer holds once tool calls are taken out of it (see `ToolCallStream`). */
export interface ToolAnswer {
  readonly content: string;
  readonly calls: readonly ToolCall[];
}

/**
 * The `chat.completion` object. `logprobs` null unless `tokenText` is given. With `tools`,
 * the message carries `tool_calls` (content null when there is no text besides them) and a
 * stop after calls is reported as `tool_calls`.
 */
export function chatCompletion(meta: ResponseMeta, result: GenerationResult, tokenText?: TokenText, tools?: ToolAnswer): ChatCompletion {
  const calls = tools?.calls ?? [];
  const content = tools ? (calls.length > 0 && tools.content.trim() === '' ? null : tools.content) : result.text;
  return {
    id: meta.id,
    object: 'chat.completion',
    created: meta.created,
    model: meta.model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content, refusal: null, ...(calls.length > 0 ? { tool_calls: chatToolCalls(calls) } : {}) },
        logprobs: tokenText ? chatLogprobs(result.tokens, tokenText) : null,
        finish_reason: calls.length > 0 && result.finishReason === 'stop' ? 'tool_calls' : result.finishReason,
      },
    ],
    usage: toOpenAIUsage(result.usage),
    system_fingerprint: meta.systemFingerprint,
  };
}

/**
 * One `chat.completion.chunk`. `choice` undefined gives the usage chunk (`choices: []`).
 * `usage`: undefined leaves the key out (no include_usage), null or a value sets it.
 */
export function chatChunk(
  meta: ResponseMeta,
  choice: ChatCompletionChunk['choices'][number] | undefined,
  usage?: OpenAIUsage | null,
): ChatCompletionChunk {
  return {
    id: meta.id,
    object: 'chat.completion.chunk',
    created: meta.created,
    model: meta.model,
    system_fingerprint: meta.systemFingerprint,
    choices: choice ? [choice] : [],
    ...(usage === undefined ? {} : { usage }),
  };
}

/** The `text_completion` object. `logprobs` null unless `tokenText` is given. */
export function textCompletion(meta: ResponseMeta, result: GenerationResult, tokenText?: TokenText): TextCompletion {
  return {
    id: meta.id,
    object: 'text_completion',
    created: meta.created,
    model: meta.model,
    system_fingerprint: meta.systemFingerprint,
    choices: [
      {
        text: result.text,
        index: 0,
        logprobs: tokenText ? completionLogprobs(result.tokens, tokenText) : null,
        finish_reason: result.finishReason,
      },
    ],
    usage: toOpenAIUsage(result.usage),
  };
}

/** One streamed `text_completion` chunk; `choice` undefined gives the usage chunk. */
export function textCompletionChunk(meta: ResponseMeta, choice: TextCompletionChoice | undefined, usage?: OpenAIUsage): TextCompletion {
  return {
    id: meta.id,
    object: 'text_completion',
    created: meta.created,
    model: meta.model,
    system_fingerprint: meta.systemFingerprint,
    choices: choice ? [choice] : [],
    ...(usage === undefined ? {} : { usage }),
  };
}

/** One server-sent event carrying `obj` as JSON. */
export function sseData(obj: unknown): string {
  return `data: ${JSON.stringify(obj)}\n\n`;
}

/** The event that ends every OpenAI stream. */
export const SSE_DONE = 'data: [DONE]\n\n';
