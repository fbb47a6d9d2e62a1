/**
 * One OpenAI completion request as a Route Session: translate the request into a session
 * request, open it in the head's session table (which decides admission, limits and stop
 * tokens, and refuses with typed errors mapped here), and answer as one JSON object or as an
 * SSE stream in the answer format asked for. The first event is awaited before any byte is
 * sent, so a route that cannot serve still gets its proper status (503) instead of a broken
 * stream. The session answers the client as soon as its outcome is known; it releases its
 * hops in the background.
 */
import { randomUUID } from 'node:crypto';
import type { RouteSession } from '../../core/route/route-session.ts';
import type { SessionEvent } from '../../core/route/route-types.ts';
import type { HeadContext } from '../head/head-node.ts';
import { mapError } from '../openai/errors.ts';
import type { OpenAIRequest } from '../openai/requests.ts';
import { type TokenText, unixSeconds, type ResponseMeta } from '../openai/responses.ts';
import { collectGeneration } from '../openai/stream.ts';
import { type AnswerFormat, openAIFormat } from './answer-formats.ts';
import { errorResponse, jsonResponse, SSE_HEADERS } from './respond.ts';

export interface RunnerContext {
  readonly head: HeadContext;
  /** A client went away before its answer ended (counted; its session is cancelled). */
  readonly onClientAbort?: () => void;
}

async function* replayFirst(first: IteratorResult<SessionEvent>, rest: AsyncIterator<SessionEvent>): AsyncGenerator<SessionEvent> {
  if (first.done) return;
  yield first.value;
  for (let next = await rest.next(); !next.done; next = await rest.next()) yield next.value;
}

export async function runCompletion(
  ctx: RunnerContext,
  request: OpenAIRequest,
  promptIds: number[],
  clientSignal: AbortSignal,
  format: (tokenText: TokenText) => AnswerFormat = (tokenText) => openAIFormat(request, tokenText),
): Promise<Response> {
  const uuid = randomUUID();
  const tokenText = (id: number) => ctx.head.tokenizer.decode([id], { skipSpecialTokens: false });
  const answer = format(tokenText);
  const meta: ResponseMeta = {
    id: `${answer.idPrefix}${uuid.replaceAll('-', '')}`,
    created: unixSeconds(),
    model: ctx.head.name,
    systemFingerprint: `meshnet-${ctx.head.model.key.slice(0, 8)}`,
  };
  const errorContext = { promptParam: request.kind === 'chat' ? ('messages' as const) : ('prompt' as const) };
  // The session's own signal: the client's disconnect, or the SSE stream's cancel.
  const abort = new AbortController();
  let session: RouteSession | undefined;
  const onClientGone = () => {
    if (abort.signal.aborted) return;
    if (session === undefined || session.telemetry.outcome === 'running') ctx.onClientAbort?.();
    abort.abort(new DOMException('the client disconnected', 'AbortError'));
  };
  if (clientSignal.aborted) onClientGone();
  else clientSignal.addEventListener('abort', onClientGone, { once: true });
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
  const opened = session;
  void opened.closed.then(() => clientSignal.removeEventListener('abort', onClientGone));

  if (!request.stream) {
    const result = await collectGeneration(opened).catch((error: unknown) => {
      throw mapError(error, errorContext);
    });
    return jsonResponse(answer.whole(meta, result));
  }

  const iterator = opened[Symbol.asyncIterator]();
  let first: IteratorResult<SessionEvent>;
  try {
    first = await iterator.next();
  } catch (error) {
    return errorResponse(mapError(error, errorContext));
  }
  const stream = answer.stream(meta);
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
        if (!abort.signal.aborted) send(stream.fail(mapError(error, errorContext)));
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
