/**
 * Route Session events → the OpenAI objects a client receives, in order. Pure state machines:
 * the h3 route writes each returned chunk with `sseData` and ends with `SSE_DONE`; tests check
 * the exact sequence without HTTP.
 *
 * Chat stream:        role chunk `{role:'assistant', content:''}` → one content chunk per token
 *                     (tokens with empty text are skipped unless logprobs are on) → the held-back
 *                     tail, if any → final chunk (empty delta, finish_reason) → usage chunk
 *                     (`choices: []`) when include_usage, every earlier chunk then has `usage: null`.
 * Completion stream:  the same without the role chunk; the final chunk has `text: ''`; earlier
 *                     chunks have no `usage` key at all (the spec's completion `usage` is not
 *                     nullable).
 */
import type { ToolCallStream } from '../../core/model/tools/tool-call-stream.ts';
import type { ToolStreamEvent } from '../../core/model/tools/tool-call-parser.ts';
import type { SessionEvent } from '../../core/route/route-types.ts';
import {
  type ChatToolCallDelta,
  type ChatCompletionChunk,
  type ChatLogprobs,
  type ChosenToken,
  type GenerationResult,
  type ResponseMeta,
  type TextCompletion,
  type TokenText,
  chatChunk,
  chatLogprobs,
  completionLogprobs,
  textCompletionChunk,
  toOpenAIUsage,
} from './responses.ts';

export interface StreamOptions {
  readonly meta: ResponseMeta;
  /** `stream_options.include_usage`. */
  readonly includeUsage: boolean;
  /** Report logprobs on each token's chunk; `tokenText` names the tokens. */
  readonly logprobs: boolean;
  readonly tokenText: TokenText;
  /**
   * Chat with tools: the answer's text goes through this stream, content becomes `content`
   * deltas and calls become `tool_calls` deltas (index, id, type and name first, then the
   * arguments as they grow); a stop after calls finishes as `tool_calls`.
   */
  readonly tools?: ToolCallStream;
}

/** Common bookkeeping: order checks and the `usage` key rule. */
abstract class StreamBuilder<Chunk> {
  protected finished = false;

  constructor(protected readonly options: StreamOptions) {}

  /** The chunks for one event, in order. Throws if called after `done`. */
  push(event: SessionEvent): Chunk[] {
    if (this.finished) throw new Error('stream builder: event after done');
    if (event.type === 'token') return this.onToken(event);
    this.finished = true;
    return this.onDone(event);
  }

  protected abstract onToken(event: ChosenToken): Chunk[];
  protected abstract onDone(event: Extract<SessionEvent, { type: 'done' }>): Chunk[];
}

/** Builds `chat.completion.chunk` objects from session events. One instance per response. */
export class ChatStreamBuilder extends StreamBuilder<ChatCompletionChunk> {
  private started = false;

  /** The role chunk; send it before the first token (shows the stream is live). Once only. */
  start(): ChatCompletionChunk[] {
    if (this.started) return [];
    this.started = true;
    return [this.choice({ role: 'assistant', content: '' }, null, null)];
  }

  override push(event: SessionEvent): ChatCompletionChunk[] {
    return [...this.start(), ...super.push(event)];
  }

  protected onToken(token: ChosenToken): ChatCompletionChunk[] {
    const { logprobs, tokenText, tools } = this.options;
    if (tools) return this.toolChunks(tools.token(token.tokenId, token.text), logprobs ? chatLogprobs([token], tokenText) : null);
    if (token.text === '' && !logprobs) return [];
    return [this.choice({ content: token.text }, logprobs ? chatLogprobs([token], tokenText) : null, null)];
  }

  protected onDone(done: Extract<SessionEvent, { type: 'done' }>): ChatCompletionChunk[] {
    const { tools } = this.options;
    const chunks: ChatCompletionChunk[] = [];
    if (tools) chunks.push(...this.toolChunks(tools.finish(done.text)));
    else if (done.text !== '') chunks.push(this.choice({ content: done.text }, null, null));
    const calls = tools?.calls.length ?? 0;
    chunks.push(this.choice({}, null, calls > 0 && done.finishReason === 'stop' ? 'tool_calls' : done.finishReason));
    if (this.options.includeUsage) chunks.push(chatChunk(this.options.meta, undefined, toOpenAIUsage(done.usage)));
    return chunks;
  }

  /**
   * Content and tool-call deltas for parsed events. `logprobs` (of the token these events came
   * from) ride on its first content delta; tokens inside a call report none.
   */
  private toolChunks(events: readonly ToolStreamEvent[], logprobs: ChatLogprobs | null = null): ChatCompletionChunk[] {
    const chunks: ChatCompletionChunk[] = [];
    let pending = logprobs;
    for (const event of events) {
      if (event.type === 'content') {
        chunks.push(this.choice({ content: event.text }, pending, null));
        pending = null;
        continue;
      }
      const delta: ChatToolCallDelta =
        event.type === 'call'
          ? { index: event.index, id: event.id, type: 'function', function: { name: event.name, arguments: '' } }
          : { index: event.index, function: { arguments: event.text } };
      chunks.push(this.choice({ tool_calls: [delta] }, null, null));
    }
    return chunks;
  }

  private choice(
    delta: ChatCompletionChunk['choices'][number]['delta'],
    logprobs: ChatCompletionChunk['choices'][number]['logprobs'],
    finishReason: ChatCompletionChunk['choices'][number]['finish_reason'],
  ): ChatCompletionChunk {
    // `usage: null` on every chunk but the usage one when include_usage; otherwise no key.
    return chatChunk(this.options.meta, { index: 0, delta, logprobs, finish_reason: finishReason }, this.options.includeUsage ? null : undefined);
  }
}

/** Builds streamed `text_completion` objects from session events. One instance per response. */
export class CompletionStreamBuilder extends StreamBuilder<TextCompletion> {
  private offset = 0; // UTF-16 units of text sent so far (logprobs text_offset)

  protected onToken(token: ChosenToken): TextCompletion[] {
    const { logprobs, tokenText } = this.options;
    if (token.text === '' && !logprobs) return [];
    const chunk = this.choice(token.text, logprobs ? completionLogprobs([token], tokenText, this.offset) : null, null);
    this.offset += token.text.length;
    return [chunk];
  }

  protected onDone(done: Extract<SessionEvent, { type: 'done' }>): TextCompletion[] {
    const chunks: TextCompletion[] = [];
    if (done.text !== '') chunks.push(this.choice(done.text, null, null));
    chunks.push(this.choice('', null, done.finishReason));
    if (this.options.includeUsage) chunks.push(textCompletionChunk(this.options.meta, undefined, toOpenAIUsage(done.usage)));
    return chunks;
  }

  private choice(text: string, logprobs: TextCompletion['choices'][number]['logprobs'], finishReason: TextCompletion['choices'][number]['finish_reason']): TextCompletion {
    return textCompletionChunk(this.options.meta, { text, index: 0, logprobs, finish_reason: finishReason });
  }
}

/** Every chunk of a chat stream for a finished event list (tests, replays). */
export function chatStreamChunks(events: Iterable<SessionEvent>, options: StreamOptions): ChatCompletionChunk[] {
  const builder = new ChatStreamBuilder(options);
  const chunks = builder.start();
  for (const event of events) chunks.push(...builder.push(event));
  return chunks;
}

/** Every chunk of a completion stream for a finished event list (tests, replays). */
export function completionStreamChunks(events: Iterable<SessionEvent>, options: StreamOptions): TextCompletion[] {
  const builder = new CompletionStreamBuilder(options);
  const chunks: TextCompletion[] = [];
  for (const event of events) chunks.push(...builder.push(event));
  return chunks;
}

/**
 * Drains a session for a non-streaming response: the full text (token texts + the released
 * tail), the finish reason, usage and every chosen token. Errors from the session propagate
 * (map them with `mapError`); a session that ends without `done` is an error too.
 */
export async function collectGeneration(events: AsyncIterable<SessionEvent>): Promise<GenerationResult> {
  const tokens: ChosenToken[] = [];
  let text = '';
  for await (const event of events) {
    text += event.text;
    if (event.type === 'token') {
      tokens.push({ tokenId: event.tokenId, text: event.text, logprob: event.logprob, topLogprobs: event.topLogprobs });
    } else {
      return { text, finishReason: event.finishReason, usage: event.usage, tokens };
    }
  }
  throw new Error('the route session ended without a done event');
}
