/**
 * Ollama's answers: `/api/chat` messages and `/api/generate` responses, whole or as NDJSON
 * (one JSON object per line, the last with `done: true`, `done_reason` and the counts and
 * durations). Pure builders over the session's events, like the OpenAI stream builders.
 *
 * - Chat text goes through the tool-call reader when the request has tools: content streams as
 *   `message.content`; the calls arrive in one chunk before the last, as
 *   `message.tool_calls: [{ id, function: { index, name, arguments: {…} } }]` (arguments an
 *   object, as Ollama sends them). A call whose arguments are not a complete JSON object (cut
 *   by `num_predict`: `done_reason` is then `length`) is left out.
 * - Durations are nanoseconds: `total_duration` from the session's start, `prompt_eval_duration`
 *   to its first token, `eval_duration` after it; `load_duration` is 0 (the model is loaded).
 * - `logprobs: [{ token, logprob, top_logprobs? }]` per chunk (and whole) when asked for.
 */
import type { ToolCallStream } from '../../core/model/tools/tool-call-stream.ts';
import type { ToolCall } from '../../core/model/tools/tool-types.ts';
import type { SessionEvent, SessionTelemetry, Usage } from '../../core/route/route-types.ts';
import type { ChosenToken, GenerationResult, TokenText } from '../openai/responses.ts';

export interface OllamaToolCall {
  readonly id: string;
  readonly function: { readonly index: number; readonly name: string; readonly arguments: Record<string, unknown> };
}

export interface OllamaLogprob {
  readonly token: string;
  readonly logprob: number;
  readonly top_logprobs?: { token: string; logprob: number }[];
}

/** What every answer object of one request shares. */
export interface OllamaAnswerOptions {
  readonly endpoint: 'chat' | 'generate';
  /** The model name as the client sent it. */
  readonly model: string;
  readonly logprobs: boolean;
  readonly topLogprobs: number;
  readonly tokenText: TokenText;
  /** A fresh tool-call reader (chat with tools). */
  readonly toolCalls?: () => ToolCallStream;
  /** The session's live telemetry (start, first token), for the durations. */
  readonly telemetry?: SessionTelemetry;
  /** Now, ms since the epoch (tests pin it). */
  readonly now?: () => number;
}

const NS_PER_MS = 1e6;

/** A call's arguments as Ollama sends them: an object, or undefined when the text is not one. */
export function argumentsObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export function ollamaToolCalls(calls: readonly ToolCall[]): OllamaToolCall[] {
  const out: OllamaToolCall[] = [];
  for (const call of calls) {
    const args = argumentsObject(call.arguments);
    if (args !== undefined) out.push({ id: call.id, function: { index: out.length, name: call.name, arguments: args } });
  }
  return out;
}

export class OllamaAnswer {
  private readonly now: () => number;

  constructor(private readonly options: OllamaAnswerOptions) {
    this.now = options.now ?? Date.now;
  }

  /** One object for a finished answer (`stream: false`). */
  whole(result: GenerationResult): Record<string, unknown> {
    const logprobs = this.logprobs(result.tokens);
    let body: Record<string, unknown>;
    if (this.options.endpoint === 'generate') body = { ...this.head(), response: result.text };
    else {
      const reader = this.options.toolCalls?.();
      const read = reader?.read(result.tokens, result.text);
      const calls = read ? ollamaToolCalls(read.calls) : [];
      body = { ...this.head(), message: { role: 'assistant', content: read ? read.content : result.text, ...(calls.length > 0 ? { tool_calls: calls } : {}) } };
    }
    return { ...body, ...(logprobs ? { logprobs } : {}), ...this.tail(result.finishReason, result.usage) };
  }

  /** The NDJSON lines of a streamed answer, event by event. */
  stream(): { push(event: SessionEvent): string; fail(message: string): string } {
    const reader = this.options.endpoint === 'chat' ? this.options.toolCalls?.() : undefined;
    const line = (value: unknown) => `${JSON.stringify(value)}\n`;
    const text = (content: string, token?: ChosenToken) => {
      const logprobs = token ? this.logprobs([token]) : undefined;
      if (content === '' && !logprobs) return '';
      const body = this.options.endpoint === 'generate' ? { response: content } : { message: { role: 'assistant', content } };
      return line({ ...this.head(), ...body, ...(logprobs ? { logprobs } : {}), done: false });
    };
    const contentOf = (events: ReturnType<ToolCallStream['token']>) => events.map((e) => (e.type === 'content' ? e.text : '')).join('');
    return {
      push: (event) => {
        if (event.type === 'token') return text(reader ? contentOf(reader.token(event.tokenId, event.text)) : event.text, event);
        let out = text(reader ? contentOf(reader.finish(event.text)) : event.text);
        const calls = reader ? ollamaToolCalls(reader.calls) : [];
        if (calls.length > 0) out += line({ ...this.head(), message: { role: 'assistant', content: '', tool_calls: calls }, done: false });
        const last = this.options.endpoint === 'generate' ? { response: '' } : { message: { role: 'assistant', content: '' } };
        return out + line({ ...this.head(), ...last, ...this.tail(event.finishReason, event.usage) });
      },
      fail: (message) => line({ error: message }),
    };
  }

  private head(): { model: string; created_at: string } {
    return { model: this.options.model, created_at: new Date(this.now()).toISOString() };
  }

  private tail(reason: string, usage: Usage): Record<string, unknown> {
    const telemetry = this.options.telemetry;
    const total = telemetry ? Math.max(0, this.now() - telemetry.startedAt) : 0;
    const prompt = Math.min(total, telemetry?.timeToFirstTokenMs ?? total);
    return {
      done: true,
      done_reason: reason,
      total_duration: Math.round(total * NS_PER_MS),
      load_duration: 0,
      prompt_eval_count: usage.promptTokens,
      prompt_eval_duration: Math.round(prompt * NS_PER_MS),
      eval_count: usage.completionTokens,
      eval_duration: Math.round((total - prompt) * NS_PER_MS),
    };
  }

  private logprobs(tokens: readonly ChosenToken[]): OllamaLogprob[] | undefined {
    if (!this.options.logprobs) return undefined;
    const { tokenText, topLogprobs } = this.options;
    return tokens.map((t) => ({
      token: tokenText(t.tokenId),
      logprob: t.logprob,
      ...(topLogprobs > 0 ? { top_logprobs: t.topLogprobs.slice(0, topLogprobs).map((a) => ({ token: tokenText(a.tokenId), logprob: a.logprob })) } : {}),
    }));
  }
}
