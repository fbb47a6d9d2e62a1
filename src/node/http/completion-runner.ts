/**
 * One OpenAI completion request, at the HTTP edge: the parsed request goes to core's one
 * entry (`head.completions.open`: template, tokenizing, admission, the grammar, the Route
 * Session), refusals are mapped once, and the answer is written as one JSON object or as an
 * SSE stream by the endpoint's {@link AnswerFormat} (tool calls included). The first event is
 * awaited before any byte is sent, so a route that cannot serve still gets its proper status
 * (503) instead of a broken stream. The session answers the client as soon as its outcome is
 * known; it releases its hops in the background.
 */
import { randomUUID } from 'node:crypto';
import { ToolCallStream } from '../../core/model/tools/tool-call-stream.ts';
import type { Completion, CompletionInput } from '../../core/route/completions.ts';
import type { SessionEvent } from '../../core/route/route-types.ts';
import type { HeadContext } from '../head/head-node.ts';
import { type ApiError, type ErrorContext, mapError } from '../openai/errors.ts';
import type { OpenAIRequest } from '../openai/requests.ts';
import { unixSeconds, type ResponseMeta } from '../openai/responses.ts';
import { collectGeneration } from '../openai/stream.ts';
import { type AnswerContext, type AnswerFormat, openAIFormat } from './answer-formats.ts';
import { errorResponse, jsonResponse, SSE_HEADERS } from './respond.ts';

export interface RunnerContext {
  readonly head: HeadContext;
}

async function* replayFirst(first: IteratorResult<SessionEvent>, rest: AsyncIterator<SessionEvent>): AsyncGenerator<SessionEvent> {
  if (first.done) return;
  yield first.value;
  for (let next = await rest.next(); !next.done; next = await rest.next()) yield next.value;
}

export interface RunOptions {
  /** `chatcmpl-`, `cmpl-`, `resp_`: the response id is this plus 32 hex digits (default: chat's or completions'). */
  readonly idPrefix?: string;
  /** How the endpoint writes its answer; chat and completions objects by default. */
  readonly format?: (answer: AnswerContext) => AnswerFormat;
  /** The fields errors name (Responses: `input`, `text.format`); by default the request kind's own. */
  readonly errors?: ErrorContext;
  /** Headers of a streamed answer (default SSE's; Ollama's NDJSON brings its own). */
  readonly streamHeaders?: Readonly<Record<string, string>>;
  /** How a refusal found before the first byte is written (default OpenAI's error body). */
  readonly errorResponse?: (error: ApiError) => Response;
}

/** What core's entry is given for `request`: its prompt (chat messages with the answer's format and tools, or a completion prompt). */
export function completionInput(request: OpenAIRequest): CompletionInput {
  if (request.kind === 'completion') return { prompt: request.prompt };
  return { messages: request.messages, responseFormat: request.responseFormat, tools: request.tools };
}

/** Runs `request` through core's entry and answers it in the endpoint's format. */
export async function runCompletion(ctx: RunnerContext, request: OpenAIRequest, clientSignal: AbortSignal, options: RunOptions = {}): Promise<Response> {
  const uuid = randomUUID();
  const { tokenizer } = ctx.head;
  const errorContext: ErrorContext = options.errors ?? { promptParam: request.kind === 'chat' ? 'messages' : 'prompt' };
  const idPrefix = options.idPrefix ?? (request.kind === 'chat' ? 'chatcmpl-' : 'cmpl-');
  const meta: ResponseMeta = { id: `${idPrefix}${uuid.replaceAll('-', '')}`, created: unixSeconds(), model: ctx.head.name, systemFingerprint: `meshnet-${ctx.head.model.key.slice(0, 8)}` };
  let completion: Completion;
  try {
    completion = await ctx.head.completions.open(
      {
        sessionId: uuid,
        label: meta.id,
        input: completionInput(request),
        sampling: { ...request.sampling, logprobs: request.logprobs, topLogprobs: request.topLogprobs },
        maxTokens: request.sampling.maxTokens,
        stopStrings: request.stopStrings,
        speculate: request.speculate,
      },
      clientSignal,
    );
  } catch (error) {
    throw mapError(error, errorContext);
  }
  const { session, toolFormat, toolCallsOnly } = completion;
  const format = (options.format ?? ((a: AnswerContext) => openAIFormat(request, a)))({
    tokenText: (id) => tokenizer.decode([id], { skipSpecialTokens: false }),
    telemetry: session.telemetry,
    ...(toolFormat ? { toolCalls: () => new ToolCallStream(toolFormat, tokenizer.specialTokens, undefined, toolCallsOnly) } : {}),
  });

  if (!request.stream) {
    const result = await collectGeneration(session).catch((error: unknown) => {
      throw mapError(error, errorContext);
    });
    return jsonResponse(format.whole(meta, result));
  }

  const iterator = session[Symbol.asyncIterator]();
  let first: IteratorResult<SessionEvent>;
  try {
    first = await iterator.next();
  } catch (error) {
    return (options.errorResponse ?? errorResponse)(mapError(error, errorContext));
  }
  const stream = format.stream(meta);
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      const send = (text: string) => {
        if (text !== '') controller.enqueue(encoder.encode(text));
      };
      try {
        send(stream.start());
        for await (const event of replayFirst(first, iterator)) send(stream.push(event));
        send(stream.end());
      } catch (error) {
        if (!completion.signal.aborted) send(stream.fail(mapError(error, errorContext)));
      } finally {
        try {
          controller.close();
        } catch {
          // The client is gone; the stream is already closed.
        }
      }
    },
    cancel() {
      completion.cancel();
    },
  });
  return new Response(body, { headers: options.streamHeaders ?? SSE_HEADERS });
}
