/**
 * How each endpoint writes its answer, for the completion runner: a whole JSON body, or SSE
 * text per session event. Chat and completions objects (`openAIFormat`) and the Responses
 * API (`responsesFormat`); the runner itself only opens the session and moves bytes.
 */
import type { ToolCallStream } from '../../core/model/tools/tool-call-stream.ts';
import type { SessionEvent, SessionTelemetry } from '../../core/route/route-types.ts';
import type { ApiError } from '../openai/errors.ts';
import { toErrorBody } from '../openai/errors.ts';
import type { OpenAIRequest } from '../openai/requests.ts';
import { chatCompletion, type GenerationResult, type ResponseMeta, sseData, SSE_DONE, textCompletion, type TokenText, unixSeconds } from '../openai/responses.ts';
import type { ResponseEcho } from '../openai/responses-echo.ts';
import { ResponsesStreamBuilder, sseEvent, wholeResponse } from '../openai/responses-stream.ts';
import { ChatStreamBuilder, CompletionStreamBuilder } from '../openai/stream.ts';

/** What the runner hands a format: how to name tokens, and how to read tool calls. */
export interface AnswerContext {
  /** One token id → its text (logprobs). */
  readonly tokenText: TokenText;
  /**
   * A fresh tool-call reader for one answer (the plan's format, the model's marker tokens);
   * absent when the answer can hold no calls.
   */
  readonly toolCalls?: () => ToolCallStream;
  /** The session's live telemetry (start time, first token), for answers that report durations. */
  readonly telemetry?: SessionTelemetry;
}

/**
 * How one endpoint writes its answer: a whole JSON body, or SSE text per session event.
 * Chat and completions use {@link openAIFormat}; `/v1/responses` brings its own.
 */
export interface AnswerFormat {
  whole(meta: ResponseMeta, result: GenerationResult): unknown;
  stream(meta: ResponseMeta): AnswerStream;
}

/** One streamed answer as SSE text. */
export interface AnswerStream {
  /** Sent once the first session event arrived, before it. */
  start(): string;
  push(event: SessionEvent): string;
  /** After the last event. */
  end(): string;
  /** A failure after the stream started (the client is still there). */
  fail(error: ApiError): string;
}

/** `chat.completion(.chunk)` or `text_completion` objects; streams end with `data: [DONE]`. */
export function openAIFormat(request: OpenAIRequest, { tokenText, toolCalls }: AnswerContext): AnswerFormat {
  const names = request.logprobs ? tokenText : undefined;
  return {
    whole(meta, result) {
      if (request.kind !== 'chat') return textCompletion(meta, result, names);
      return chatCompletion(meta, result, names, toolCalls?.().read(result.tokens, result.text));
    },
    stream(meta) {
      const options = { meta, includeUsage: request.includeUsage, logprobs: request.logprobs, tokenText, tools: request.kind === 'chat' ? toolCalls?.() : undefined };
      const builder = request.kind === 'chat' ? new ChatStreamBuilder(options) : new CompletionStreamBuilder(options);
      const text = (chunks: readonly unknown[]) => chunks.map(sseData).join('');
      return {
        start: () => (builder instanceof ChatStreamBuilder ? text(builder.start()) : ''),
        push: (event) => text(builder.push(event)),
        end: () => SSE_DONE,
        fail: (error) => sseData(toErrorBody(error)),
      };
    },
  };
}

/**
 * `Response` objects of `/v1/responses`; streams are named events with sequence numbers and
 * end at the terminal event (no `[DONE]`). Tool calls are `function_call` output items. A
 * failure mid-stream is `response.failed`.
 */
export function responsesFormat(echo: ResponseEcho, logprobs: boolean, { tokenText, toolCalls }: AnswerContext): AnswerFormat {
  const context = (meta: ResponseMeta) => ({ meta, echo, tokenText, logprobs, ...(toolCalls ? { tools: toolCalls() } : {}) });
  return {
    whole: (meta, result) => wholeResponse(context(meta), result, unixSeconds()),
    stream(meta) {
      const builder = new ResponsesStreamBuilder(context(meta));
      const text = (events: ReturnType<ResponsesStreamBuilder['start']>) => events.map(sseEvent).join('');
      return {
        start: () => text(builder.start()),
        push: (event) => text(builder.push(event)),
        end: () => '',
        fail: (error) => text(builder.fail(error)),
      };
    },
  };
}
