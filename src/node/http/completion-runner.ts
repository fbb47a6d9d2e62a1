/**
 * One OpenAI completion request as a Route Session: build the sampling parameters, open
 * the session (with the client's disconnect signal), and answer as one JSON object or as an
 * SSE stream. The first event is awaited before any byte is sent, so a route that cannot
 * serve still gets its proper status (503) instead of a broken stream.
 */
import { randomUUID } from 'node:crypto';
import type { RouteSession } from '../../core/route/route-session.ts';
import type { SessionEvent } from '../../core/route/route-types.ts';
import { validateSamplingParams } from '../../core/sampling/index.ts';
import type { HeadContext } from '../head/head-node.ts';
import type { SessionTracker, TrackedSession } from '../head/session-tracker.ts';
import { mapError, tooManyRequests } from '../openai/errors.ts';
import { fitMaxTokens, type OpenAIRequest } from '../openai/requests.ts';
import { type TokenText, unixSeconds, type ResponseMeta } from '../openai/responses.ts';
import { collectGeneration } from '../openai/stream.ts';
import { type AnswerFormat, openAIFormat } from './answer-formats.ts';
import { errorResponse, jsonResponse, SSE_HEADERS } from './respond.ts';

export interface RunnerContext {
  readonly head: HeadContext;
  readonly tracker: SessionTracker;
  readonly contextLength: number;
  readonly stopTokenIds: readonly number[];
  /** `--min-peers`: resolves once enough peers joined, rejects (→ 503) after `--peer-wait`. */
  readonly waitForPeers?: (signal: AbortSignal) => Promise<void>;
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
  await ctx.waitForPeers?.(clientSignal);
  const maxTokens = fitMaxTokens(request, promptIds.length, ctx.contextLength);
  const params = validateSamplingParams({
    ...request.sampling,
    maxTokens,
    stopTokenIds: ctx.stopTokenIds,
    logprobs: request.logprobs,
    topLogprobs: request.topLogprobs,
  });
  const uuid = randomUUID();
  const tokenText = (id: number) => ctx.head.tokenizer.decode([id], { skipSpecialTokens: false });
  const answer = format(tokenText);
  const meta: ResponseMeta = {
    id: `${answer.idPrefix}${uuid.replaceAll('-', '')}`,
    created: unixSeconds(),
    model: ctx.head.name,
    systemFingerprint: `meshnet-${ctx.head.model.key.slice(0, 8)}`,
  };
  const abort = new AbortController();
  const onClientGone = () => abort.abort(new DOMException('the client disconnected', 'AbortError'));
  if (clientSignal.aborted) onClientGone();
  else clientSignal.addEventListener('abort', onClientGone, { once: true });
  let tracked: TrackedSession | undefined;
  const session: RouteSession = ctx.head.openSession({ sessionId: uuid, promptIds, params, stopStrings: request.stopStrings }, abort.signal, (t) => tracked?.onUpdate(t));
  tracked = ctx.tracker.begin(meta.id, session.telemetry);
  if (!tracked) {
    clientSignal.removeEventListener('abort', onClientGone);
    ctx.tracker.refused();
    throw tooManyRequests(`the server is running its maximum of ${ctx.tracker.liveSessions} sessions; retry shortly`, 1);
  }
  const done = () => {
    clientSignal.removeEventListener('abort', onClientGone);
    tracked!.finish(session.telemetry);
  };

  if (!request.stream) {
    try {
      return jsonResponse(answer.whole(meta, await collectGeneration(session)));
    } finally {
      done();
    }
  }

  const iterator = session[Symbol.asyncIterator]();
  let first: IteratorResult<SessionEvent>;
  try {
    first = await iterator.next();
  } catch (error) {
    done();
    return errorResponse(error);
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
        if (!abort.signal.aborted) send(stream.fail(mapError(error)));
      } finally {
        done();
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
