/**
 * One OpenAI completion request as a Route Session: translate the request into a session
 * request, open it in the head's session table (which decides admission, limits and stop
 * tokens, and refuses with typed errors mapped here), and answer as one JSON object or as an
 * SSE stream. The first event is awaited before any byte is sent, so a route that cannot
 * serve still gets its proper status (503) instead of a broken stream. The session answers
 * the client as soon as its outcome is known; it releases its hops in the background.
 */
import { randomUUID } from 'node:crypto';
import type { RouteSession } from '../../core/route/route-session.ts';
import type { SessionEvent } from '../../core/route/route-types.ts';
import type { HeadContext } from '../head/head-node.ts';
import { mapError, toErrorBody } from '../openai/errors.ts';
import type { OpenAIRequest } from '../openai/requests.ts';
import { chatCompletion, sseData, SSE_DONE, textCompletion, unixSeconds, type ResponseMeta } from '../openai/responses.ts';
import { ChatStreamBuilder, CompletionStreamBuilder, collectGeneration } from '../openai/stream.ts';
import { errorResponse, jsonResponse } from './respond.ts';

export interface RunnerContext {
  readonly head: HeadContext;
}

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' };

async function* replayFirst(first: IteratorResult<SessionEvent>, rest: AsyncIterator<SessionEvent>): AsyncGenerator<SessionEvent> {
  if (first.done) return;
  yield first.value;
  for (let next = await rest.next(); !next.done; next = await rest.next()) yield next.value;
}

export async function runCompletion(ctx: RunnerContext, request: OpenAIRequest, promptIds: number[], clientSignal: AbortSignal): Promise<Response> {
  const uuid = randomUUID();
  const meta: ResponseMeta = {
    id: `${request.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${uuid.replaceAll('-', '')}`,
    created: unixSeconds(),
    model: ctx.head.name,
    systemFingerprint: `meshnet-${ctx.head.model.key.slice(0, 8)}`,
  };
  const errorContext = { promptParam: request.kind === 'chat' ? ('messages' as const) : ('prompt' as const) };
  // The session's own signal: the client's disconnect, or the SSE stream's cancel.
  const abort = new AbortController();
  const onClientGone = () => abort.abort(new DOMException('the client disconnected', 'AbortError'));
  if (clientSignal.aborted) onClientGone();
  else clientSignal.addEventListener('abort', onClientGone, { once: true });
  let session: RouteSession;
  try {
    session = await ctx.head.sessions.open(
      {
        sessionId: uuid,
        promptIds,
        sampling: { ...request.sampling, logprobs: request.logprobs, topLogprobs: request.topLogprobs },
        maxTokens: request.maxTokensRequested ? request.sampling.maxTokens : undefined,
        stopStrings: request.stopStrings,
        label: meta.id,
      },
      abort.signal,
    );
  } catch (error) {
    clientSignal.removeEventListener('abort', onClientGone);
    throw mapError(error, errorContext);
  }
  void session.closed.then(() => clientSignal.removeEventListener('abort', onClientGone));
  const tokenText = (id: number) => ctx.head.tokenizer.decode([id], { skipSpecialTokens: false });

  if (!request.stream) {
    const result = await collectGeneration(session).catch((error: unknown) => {
      throw mapError(error, errorContext);
    });
    const body = request.kind === 'chat' ? chatCompletion(meta, result, request.logprobs ? tokenText : undefined) : textCompletion(meta, result, request.logprobs ? tokenText : undefined);
    return jsonResponse(body);
  }

  const iterator = session[Symbol.asyncIterator]();
  let first: IteratorResult<SessionEvent>;
  try {
    first = await iterator.next();
  } catch (error) {
    return errorResponse(mapError(error, errorContext));
  }
  const options = { meta, includeUsage: request.includeUsage, logprobs: request.logprobs, tokenText };
  const builder = request.kind === 'chat' ? new ChatStreamBuilder(options) : new CompletionStreamBuilder(options);
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      const send = (text: string) => controller.enqueue(encoder.encode(text));
      try {
        if (builder instanceof ChatStreamBuilder) for (const chunk of builder.start()) send(sseData(chunk));
        for await (const event of replayFirst(first, iterator)) for (const chunk of builder.push(event)) send(sseData(chunk));
        send(SSE_DONE);
      } catch (error) {
        if (!abort.signal.aborted) send(sseData(toErrorBody(mapError(error, errorContext))));
      } finally {
        try {
          controller.close();
        } catch {
          // The client is gone; the stream is already closed.
        }
      }
    },
    cancel() {
      onClientGone();
    },
  });
  return new Response(body, { headers: SSE_HEADERS });
}
