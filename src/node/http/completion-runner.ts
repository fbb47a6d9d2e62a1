/**
 * One OpenAI completion request as a Route Session: build the sampling parameters, compile
 * the answer's grammar (JSON schema, tool calls) into a token constraint, open the session
 * (with the client's disconnect signal), and answer as one JSON object or as an SSE stream,
 * written by the endpoint's {@link AnswerFormat}. The first event is awaited before any byte
 * is sent, so a route that cannot serve still gets its proper status (503) instead of a
 * broken stream.
 */
import { randomUUID } from 'node:crypto';
import type { ToolCallFormat } from '../../core/model/tools/tool-call-format.ts';
import { ToolCallStream } from '../../core/model/tools/tool-call-stream.ts';
import type { RouteSession } from '../../core/route/route-session.ts';
import { GrammarError, type GrammarEngine, type OutputGrammar } from '../../core/sampling/grammar/output-grammar.ts';
import { ConstraintDeadEndError, maskAllowsAny, type TokenConstraint } from '../../core/sampling/index.ts';
import type { SessionEvent } from '../../core/route/route-types.ts';
import { validateSamplingParams } from '../../core/sampling/index.ts';
import type { HeadContext } from '../head/head-node.ts';
import type { SessionTracker, TrackedSession } from '../head/session-tracker.ts';
import { invalidRequest, mapError, tooManyRequests } from '../openai/errors.ts';
import { fitMaxTokens, type OpenAIRequest } from '../openai/requests.ts';
import { unixSeconds, type ResponseMeta } from '../openai/responses.ts';
import { collectGeneration } from '../openai/stream.ts';
import { type AnswerContext, type AnswerFormat, openAIFormat } from './answer-formats.ts';
import { errorResponse, jsonResponse, SSE_HEADERS } from './respond.ts';

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

async function* replayFirst(first: IteratorResult<SessionEvent>, rest: AsyncIterator<SessionEvent>): AsyncGenerator<SessionEvent> {
  if (first.done) return;
  yield first.value;
  for (let next = await rest.next(); !next.done; next = await rest.next()) yield next.value;
}

/** What the answer must look like and how to read tool calls out of it (`planStructuredChat`). */
export interface OutputPlan {
  readonly grammar?: OutputGrammar;
  readonly toolFormat?: ToolCallFormat;
}

export interface RunOptions {
  /** The grammar the session samples under and the tool-call format; none: free text. */
  readonly plan?: OutputPlan;
  /** How the endpoint writes its answer; chat and completions objects by default. */
  readonly format?: (answer: AnswerContext) => AnswerFormat;
}

/** The grammar's constraint for one session; a schema the engine refuses is a 400. */
async function openConstraint(ctx: RunnerContext, request: OpenAIRequest, grammar: OutputGrammar | undefined): Promise<TokenConstraint | undefined> {
  if (grammar === undefined) return undefined;
  const param = request.kind === 'chat' && request.tools ? 'tools' : 'response_format';
  if (!ctx.grammar) throw invalidRequest(`Unsupported parameter: '${param}': this model defines no end-of-sequence token, so a constrained answer could never end.`, param, 'unsupported_parameter');
  let constraint: TokenConstraint;
  try {
    constraint = await ctx.grammar.constraint(grammar);
  } catch (error) {
    if (error instanceof GrammarError) throw invalidRequest(`Invalid schema for '${param}': ${error.message}`, param, 'invalid_schema');
    throw error;
  }
  // A vocabulary that cannot spell the format's first token (a word-level one asked for JSON)
  // is refused before the session starts; later dead ends end it with ConstraintDeadEndError.
  const first = await constraint.nextMask().catch((error: unknown) => {
    constraint.dispose();
    throw error;
  });
  if (first && !maskAllowsAny(first, first.length * 32)) {
    constraint.dispose();
    throw invalidRequest(`Unsupported value: '${param}' cannot be written by this model: ${new ConstraintDeadEndError().message}.`, param, 'unsupported_value');
  }
  return constraint;
}

/**
 * Runs `request` on `promptIds`. The runner compiles the plan's grammar into the session's
 * constraint (the session owns it from then on), opens the session and moves the bytes; the
 * format writes every body and event, tool calls included.
 */
export async function runCompletion(ctx: RunnerContext, request: OpenAIRequest, promptIds: number[], clientSignal: AbortSignal, options: RunOptions = {}): Promise<Response> {
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
  const { tokenizer } = ctx.head;
  const toolFormat = options.plan?.toolFormat;
  const answer = (options.format ?? ((a: AnswerContext) => openAIFormat(request, a)))({
    tokenText: (id) => tokenizer.decode([id], { skipSpecialTokens: false }),
    ...(toolFormat ? { toolCalls: () => new ToolCallStream(toolFormat, tokenizer.specialTokens) } : {}),
  });
  const meta: ResponseMeta = {
    id: `${answer.idPrefix}${uuid.replaceAll('-', '')}`,
    created: unixSeconds(),
    model: ctx.head.name,
    systemFingerprint: `meshnet-${ctx.head.model.key.slice(0, 8)}`,
  };
  // Compiling a new grammar can take a while; the session does not exist yet.
  const constraint = await openConstraint(ctx, request, options.plan?.grammar);
  const abort = new AbortController();
  const onClientGone = () => abort.abort(new DOMException('the client disconnected', 'AbortError'));
  if (clientSignal.aborted) onClientGone();
  else clientSignal.addEventListener('abort', onClientGone, { once: true });
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
