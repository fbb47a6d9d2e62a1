/**
 * One OpenAI completion request as a Route Session: compile the answer's grammar (JSON
 * schema, tool calls) into a token constraint, translate the request into a session request,
 * open it in the head's session table (which decides admission, limits and stop tokens, and
 * refuses with typed errors mapped here), and answer as one JSON object or as an SSE stream,
 * written by the endpoint's {@link AnswerFormat} (tool calls included). The first event is
 * awaited before any byte is sent, so a route that cannot serve still gets its proper status
 * (503) instead of a broken stream. The session answers the client as soon as its outcome is
 * known; it releases its hops in the background.
 */
import { randomUUID } from 'node:crypto';
import type { ToolCallFormat } from '../../core/model/tools/tool-call-format.ts';
import { ToolCallStream } from '../../core/model/tools/tool-call-stream.ts';
import type { RouteSession } from '../../core/route/route-session.ts';
import { GrammarError, type GrammarEngine, type OutputGrammar } from '../../core/sampling/grammar/output-grammar.ts';
import { ConstraintDeadEndError, maskAllowsAny, type TokenConstraint } from '../../core/sampling/index.ts';
import type { SessionEvent } from '../../core/route/route-types.ts';
import type { HeadContext } from '../head/head-node.ts';
import { type ErrorContext, invalidRequest, mapError, type PromptParam } from '../openai/errors.ts';
import type { OpenAIRequest } from '../openai/requests.ts';
import { unixSeconds, type ResponseMeta } from '../openai/responses.ts';
import { collectGeneration } from '../openai/stream.ts';
import { type AnswerContext, type AnswerFormat, openAIFormat } from './answer-formats.ts';
import { errorResponse, jsonResponse, SSE_HEADERS } from './respond.ts';

export interface RunnerContext {
  readonly head: HeadContext;
  /** A client went away before its answer ended (counted; its session is cancelled). */
  readonly onClientAbort?: () => void;
  /** Compiles JSON / tool grammars; undefined when the model has no stop token to end them. */
  readonly grammar?: GrammarEngine;
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
  /** The field errors name as the prompt's, when not the request kind's own (Responses: `input`). */
  readonly promptParam?: PromptParam;
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
  const errorContext: ErrorContext = { promptParam: options.promptParam ?? (request.kind === 'chat' ? 'messages' : 'prompt') };
  // Compiling a new grammar can take a while; the session does not exist yet. From here the
  // session table owns the constraint (it disposes it when it refuses the session).
  const constraint = await openConstraint(ctx, request, options.plan?.grammar);
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
        speculate: request.speculate,
        constraint,
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
