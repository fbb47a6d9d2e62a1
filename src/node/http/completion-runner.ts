/**
 * One OpenAI completion request as a Route Session: build the sampling parameters, open
 * the session (with the client's disconnect signal), and answer as one JSON object or as an
 * SSE stream. The first event is awaited before any byte is sent, so a route that cannot
 * serve still gets its proper status (503) instead of a broken stream.
 */
import { randomUUID } from 'node:crypto';
import type { ToolCallFormat } from '../../core/model/tools/tool-call-format.ts';
import { ToolCallStream } from '../../core/model/tools/tool-call-stream.ts';
import type { RouteSession } from '../../core/route/route-session.ts';
import { GrammarError, type GrammarEngine, type OutputGrammar } from '../../core/sampling/grammar/output-grammar.ts';
import type { TokenConstraint } from '../../core/sampling/index.ts';
import type { SessionEvent } from '../../core/route/route-types.ts';
import { validateSamplingParams } from '../../core/sampling/index.ts';
import type { HeadContext } from '../head/head-node.ts';
import type { SessionTracker, TrackedSession } from '../head/session-tracker.ts';
import { invalidRequest, mapError, toErrorBody, tooManyRequests } from '../openai/errors.ts';
import { fitMaxTokens, type OpenAIRequest } from '../openai/requests.ts';
import { chatCompletion, sseData, SSE_DONE, textCompletion, unixSeconds, type ResponseMeta } from '../openai/responses.ts';
import { ChatStreamBuilder, CompletionStreamBuilder, collectGeneration } from '../openai/stream.ts';
import { errorResponse, jsonResponse } from './respond.ts';

export interface RunnerContext {
  readonly head: HeadContext;
  readonly tracker: SessionTracker;
  readonly contextLength: number;
  readonly stopTokenIds: readonly number[];
  /** Compiles JSON / tool grammars; undefined when the model has no stop token to end them. */
  readonly grammar?: GrammarEngine;
  /** `--min-peers`: resolves once enough peers joined, rejects (→ 503) after `--peer-wait`. */
  readonly waitForPeers?: (signal: AbortSignal) => Promise<void>;
}

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' };

async function* replayFirst(first: IteratorResult<SessionEvent>, rest: AsyncIterator<SessionEvent>): AsyncGenerator<SessionEvent> {
  if (first.done) return;
  yield first.value;
  for (let next = await rest.next(); !next.done; next = await rest.next()) yield next.value;
}

/** What a chat answer must look like and how to read tool calls out of it (`planStructuredChat`). */
export interface OutputPlan {
  readonly grammar?: OutputGrammar;
  readonly toolFormat?: ToolCallFormat;
}

/** The grammar's constraint for one session; a schema the engine refuses is a 400. */
async function openConstraint(ctx: RunnerContext, request: OpenAIRequest, grammar: OutputGrammar | undefined): Promise<TokenConstraint | undefined> {
  if (grammar === undefined) return undefined;
  const param = request.kind === 'chat' && request.tools ? 'tools' : 'response_format';
  if (!ctx.grammar) throw invalidRequest(`Unsupported parameter: '${param}': this model defines no end-of-sequence token, so a constrained answer could never end.`, param, 'unsupported_parameter');
  try {
    return await ctx.grammar.constraint(grammar);
  } catch (error) {
    if (error instanceof GrammarError) throw invalidRequest(`Invalid schema for '${param}': ${error.message}`, param, 'invalid_schema');
    throw error;
  }
}

export async function runCompletion(ctx: RunnerContext, request: OpenAIRequest, promptIds: number[], clientSignal: AbortSignal, output: OutputPlan = {}): Promise<Response> {
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
  const meta: ResponseMeta = {
    id: `${request.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${uuid.replaceAll('-', '')}`,
    created: unixSeconds(),
    model: ctx.head.name,
    systemFingerprint: `meshnet-${ctx.head.model.key.slice(0, 8)}`,
  };
  const abort = new AbortController();
  const onClientGone = () => abort.abort(new DOMException('the client disconnected', 'AbortError'));
  if (clientSignal.aborted) onClientGone();
  else clientSignal.addEventListener('abort', onClientGone, { once: true });
  let constraint: TokenConstraint | undefined;
  try {
    constraint = await openConstraint(ctx, request, output.grammar);
  } catch (error) {
    clientSignal.removeEventListener('abort', onClientGone);
    throw error;
  }
  let tracked: TrackedSession | undefined;
  const session: RouteSession = ctx.head.openSession({ sessionId: uuid, promptIds, params, stopStrings: request.stopStrings, constraint }, abort.signal, (t) => tracked?.onUpdate(t));
  tracked = ctx.tracker.begin(meta.id, session.telemetry);
  if (!tracked) {
    clientSignal.removeEventListener('abort', onClientGone);
    constraint?.dispose(); // the session never runs, so it never closes
    ctx.tracker.refused();
    throw tooManyRequests(`the server is running its maximum of ${ctx.tracker.liveSessions} sessions; retry shortly`, 1);
  }
  const done = () => {
    clientSignal.removeEventListener('abort', onClientGone);
    tracked!.finish(session.telemetry);
  };
  const tokenText = (id: number) => ctx.head.tokenizer.decode([id], { skipSpecialTokens: false });
  const toolStream = () => (output.toolFormat ? new ToolCallStream(output.toolFormat, ctx.head.tokenizer.specialTokens) : undefined);

  if (!request.stream) {
    try {
      const result = await collectGeneration(session);
      const tools = toolStream();
      if (tools) {
        for (const token of result.tokens) tools.token(token.tokenId, token.text);
        tools.finish(result.text.slice(result.tokens.reduce((n, t) => n + t.text.length, 0)));
      }
      const answer = tools ? { content: tools.text, calls: tools.calls } : undefined;
      const body = request.kind === 'chat' ? chatCompletion(meta, result, request.logprobs ? tokenText : undefined, answer) : textCompletion(meta, result, request.logprobs ? tokenText : undefined);
      return jsonResponse(body);
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
  const options = { meta, includeUsage: request.includeUsage, logprobs: request.logprobs, tokenText, tools: toolStream() };
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
        if (!abort.signal.aborted) send(sseData(toErrorBody(mapError(error))));
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
