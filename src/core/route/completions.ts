/**
 * Completions: the one entry for a request in core. Chat completions, completions and the
 * Responses API only parse, format and map errors at the HTTP edge; everything between is
 * here, in this order:
 *
 * 1. the prompt: chat messages through the model's chat template (tools rendered by the
 *    template, or the generic format; `planStructuredChat` also picks the answer's grammar and
 *    tool-call format), or a completion prompt as text or token ids;
 * 2. tokenizing;
 * 3. admission by the session table (RouteSessions): the empty prompt, the context limit and
 *    the default answer length, the sampling values and stop tokens, `--min-peers`,
 *    `--max-sessions`;
 * 4. only for an admitted request, the grammar compiled into the session's token constraint
 *    (a request that gets a 429 compiles nothing);
 * 5. the Route Session, which the client's signal ends. A client that leaves before its answer
 *    ended is counted (`onClientAbort`).
 *
 * Refusals are typed errors (AnswerFormatError, EmptyPromptError, and the session table's);
 * the edge maps them once.
 */
import type { GenerationLimits } from '../model/generation-limits.ts';
import { createGrammarEngine, planStructuredChat, type GrammarHost, type ResponseFormat } from '../model/structured-output.ts';
import type { ChatMessage, TextTokenizer } from '../model/tokenizer.ts';
import type { ToolCallFormat } from '../model/tools/tool-call-format.ts';
import type { ToolRequest } from '../model/tools/tool-types.ts';
import { GrammarError, type GrammarEngine, type OutputGrammar } from '../sampling/grammar/output-grammar.ts';
import type { XGrammarLoader } from '../sampling/grammar/xgrammar-module.ts';
import { ConstraintDeadEndError, maskAllowsAny, type SamplingParams, type TokenConstraint } from '../sampling/index.ts';
import type { SpeculateMode } from '../speculation/drafter.ts';
import { AnswerFormatError } from './route-errors.ts';
import type { RouteSession } from './route-session.ts';
import type { RouteSessions } from './route-sessions.ts';

/** Chat messages with the answer's format and tools, or a completion prompt (text to tokenize, or token ids as given). */
export type CompletionInput =
  | { readonly messages: readonly ChatMessage[]; readonly responseFormat?: ResponseFormat; readonly tools?: ToolRequest }
  | { readonly prompt: string | readonly number[] };

export interface CompletionRequest {
  readonly sessionId: string; // a lowercase UUID
  /** What observers call the session (the API response id); default the session id. */
  readonly label?: string;
  readonly input: CompletionInput;
  /** How to sample (logprobs included); `maxTokens` and `stopTokenIds` here are ignored. */
  readonly sampling?: Partial<SamplingParams>;
  /** Tokens asked for; undefined: the model's default, cut to the room left in the context. */
  readonly maxTokens?: number;
  readonly stopStrings?: readonly string[];
  /** How to draft (the `speculate` extension field); default the head's (`--speculate`). */
  readonly speculate?: SpeculateMode;
}

/** An admitted request: its running session, and how to read tool calls out of its answer. */
export interface Completion {
  readonly session: RouteSession;
  /** The answer's tool calls are in this format; undefined when it can hold none. */
  readonly toolFormat?: ToolCallFormat;
  /** The answer holds only tool calls (`tool_choice` required or a named function). */
  readonly toolCallsOnly: boolean;
  /** Aborts when the client went away (its disconnect, or `cancel`). */
  readonly signal: AbortSignal;
  /** The client went away (a stream's cancel): the session is cancelled and counted as its client's abort. */
  cancel(): void;
}

export interface CompletionsOptions {
  readonly sessions: RouteSessions;
  readonly tokenizer: TextTokenizer;
  /** The model's stop tokens end constrained answers (without one, JSON and tool grammars are refused). */
  readonly limits: GenerationLimits;
  /** The model's logits length. */
  readonly vocabSize: number;
  /** Loads xgrammar (its WebAssembly, on the first constrained request); absent: such requests are refused. */
  readonly loadGrammar?: XGrammarLoader;
  /** Runs the grammar engine elsewhere (Node: a worker thread); absent: on this thread, over `loadGrammar`. */
  readonly grammarHost?: GrammarHost;
  /** A client left before its answer ended (its session, if it had one, is cancelled). */
  readonly onClientAbort?: () => void;
}

type GrammarField = AnswerFormatError['field'];

export class Completions {
  private readonly engine: GrammarEngine | undefined;

  constructor(private readonly options: CompletionsOptions) {
    const { limits, loadGrammar, grammarHost, tokenizer, vocabSize } = options;
    // Without a stop token a constrained answer could never end: no engine, such requests are refused.
    this.engine = loadGrammar && limits.stopTokenIds.length > 0 ? createGrammarEngine(loadGrammar, tokenizer, vocabSize, limits.stopTokenIds, grammarHost) : undefined;
  }

  /**
   * Admit `request` and start its session (see the file's header for the order). Throws the
   * typed refusals, before any frame is sent; `clientSignal` aborting ends the session.
   */
  async open(request: CompletionRequest, clientSignal: AbortSignal): Promise<Completion> {
    const { promptIds, grammar, toolFormat, toolCallsOnly, field } = this.prompt(request.input);
    // The session's own signal: the client's disconnect, or `cancel` (a stream's).
    const abort = new AbortController();
    let session: RouteSession | undefined;
    const gone = () => {
      if (abort.signal.aborted) return;
      if (session === undefined || session.telemetry.outcome === 'running') this.options.onClientAbort?.();
      abort.abort(new DOMException('the client disconnected', 'AbortError'));
    };
    if (clientSignal.aborted) gone();
    else clientSignal.addEventListener('abort', gone, { once: true });
    try {
      session = await this.options.sessions.open(
        {
          sessionId: request.sessionId,
          label: request.label,
          promptIds,
          sampling: request.sampling,
          maxTokens: request.maxTokens,
          stopStrings: request.stopStrings,
          speculate: request.speculate,
          endNaturally: 'messages' in request.input,
          compileConstraint: grammar && (() => this.compile(grammar, field)),
        },
        abort.signal,
      );
    } catch (error) {
      clientSignal.removeEventListener('abort', gone);
      throw error;
    }
    void session.closed.then(() => clientSignal.removeEventListener('abort', gone));
    return { session, toolFormat, toolCallsOnly: toolCallsOnly ?? false, signal: abort.signal, cancel: gone };
  }

  /** Frees the grammar engine (compiled grammars, the WebAssembly instances). */
  dispose(): void {
    this.engine?.dispose();
  }

  /** The prompt's tokens, and for chat the answer's grammar and tool-call format. */
  private prompt(input: CompletionInput): { promptIds: readonly number[]; grammar?: OutputGrammar; toolFormat?: ToolCallFormat; toolCallsOnly?: boolean; field: GrammarField } {
    const { tokenizer } = this.options;
    if ('prompt' in input) return { promptIds: typeof input.prompt === 'string' ? tokenizer.encode(input.prompt) : input.prompt, field: 'format' };
    const plan = planStructuredChat(tokenizer, input);
    return {
      promptIds: tokenizer.encode(plan.prompt, { addSpecialTokens: false }),
      grammar: plan.grammar,
      toolFormat: plan.toolFormat,
      toolCallsOnly: plan.toolCallsOnly,
      field: input.tools ? 'tools' : 'format',
    };
  }

  /** The grammar's constraint for one admitted session; AnswerFormatError when it cannot be served. */
  private async compile(grammar: OutputGrammar, field: GrammarField): Promise<TokenConstraint> {
    if (!this.engine) throw new AnswerFormatError('no_end_token', field, 'this model defines no end-of-sequence token, so a constrained answer could never end');
    let constraint: TokenConstraint;
    try {
      constraint = await this.engine.constraint(grammar);
    } catch (error) {
      if (error instanceof GrammarError) throw new AnswerFormatError('invalid_schema', field, error.message);
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
      throw new AnswerFormatError('unwritable', field, new ConstraintDeadEndError().message);
    }
    return constraint;
  }
}
