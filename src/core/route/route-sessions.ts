/**
 * The head's live Route Sessions (the design's `routeSessions.open`): the one owner that
 * decides whether a request gets a session — the context limit and stop tokens, `--min-peers`
 * waiting, the `--max-sessions` slots — and that cancels every live session at shutdown.
 *
 * A slot is held from `open` until the session's outcome is recorded: a client that goes
 * away frees it synchronously, in its abort, and a finished session frees it before its hops
 * are released (that goes on in the background). The HTTP edge only translates requests and
 * responses; every refusal here is a typed error it maps once.
 */
import { completionBudget, type GenerationLimits } from '../model/generation-limits.ts';
import { systemClock, type Clock } from '../runtime/clock.ts';
import { validateSamplingParams, type SamplingParams, type TokenConstraint } from '../sampling/index.ts';
import type { SpeculateMode } from '../speculation/drafter.ts';
import { Drafters, SpeculationUnavailableError } from '../speculation/drafters.ts';
import { EmptyPromptError, PeerWaitError, SessionLimitError, ShuttingDownError } from './route-errors.ts';
import { RouteSession, type RouteSessionDeps } from './route-session.ts';
import type { SessionTelemetry } from './route-types.ts';

export interface SessionRequest {
  readonly sessionId: string; // a lowercase UUID
  readonly promptIds: readonly number[];
  /** How to sample; `maxTokens` and `stopTokenIds` here are ignored (they come from the limits). */
  readonly sampling?: Partial<SamplingParams>;
  /** Tokens asked for; undefined: the model's default (`limits.defaultMaxTokens`), cut to the room left in the context. */
  readonly maxTokens?: number;
  readonly stopStrings?: readonly string[];
  /** The answer to a conversation: it may end at the model's natural end (`limits.naturalEnd`) where its grammar, if any, lets it end. */
  readonly endNaturally?: boolean;
  /** What observers call the session (the API response id); default the session id. */
  readonly label?: string;
  /** How to draft (the `speculate` extension field); default the head's (`--speculate`). */
  readonly speculate?: SpeculateMode;
  /**
   * Restricts every sampled token (JSON schema, tool-call grammar). Owned from `open` on: a
   * refused open disposes it, and an opened session disposes it when it settles.
   */
  readonly constraint?: TokenConstraint;
  /**
   * Makes the constraint once the request is admitted (a slot held), so a request refused for
   * want of a slot never compiles its grammar; what it throws refuses the request (the slot is
   * freed). Instead of `constraint`.
   */
  readonly compileConstraint?: () => Promise<TokenConstraint | undefined>;
}

/** `--min-peers`: requests wait up to `waitMs` for `count` peers to have joined. */
export interface PeerQuorum {
  readonly count: number;
  readonly waitMs: number;
  joined(): number;
  /** Hear membership changes; returns an unsubscribe. */
  onChange(listener: () => void): () => void;
}

/** Accounting (dashboard, metrics): told of each session by its label. */
export interface SessionObserver {
  started?(label: string, telemetry: SessionTelemetry): void;
  updated?(label: string, telemetry: SessionTelemetry): void;
  /** The outcome was recorded (before the hops are released). */
  finished?(label: string, telemetry: SessionTelemetry): void;
  /** A request was refused for want of a slot. */
  refused?(error: SessionLimitError): void;
}

export interface RouteSessionsOptions {
  /** What every session shares: handed to each session as it is (its drafters also say which `speculate` modes exist). */
  readonly session: RouteSessionDeps;
  readonly limits: GenerationLimits;
  /** Sessions live at once; one more gets SessionLimitError (429). */
  readonly maxSessions: number;
  readonly minPeers?: PeerQuorum;
  readonly observer?: SessionObserver;
  /** How sessions draft when the request does not say (`--speculate`, default 'ngram'). */
  readonly speculate?: SpeculateMode;
}

export class RouteSessions {
  private readonly tracked = new Set<RouteSession>();
  private slots = 0;
  private shuttingDown = false;
  private readonly clock: Clock;

  constructor(private readonly options: RouteSessionsOptions) {
    if (!Number.isSafeInteger(options.maxSessions) || options.maxSessions < 1) throw new RangeError(`maxSessions must be a positive integer, got ${options.maxSessions}`);
    this.clock = options.session.clock ?? systemClock;
  }

  /** Sessions holding a slot now. */
  get live(): number {
    return this.slots;
  }

  /** Sessions not yet closed (their hops may still be releasing). */
  get sessions(): readonly RouteSession[] {
    return [...this.tracked];
  }

  /**
   * A new session for `request`, holding one slot. Throws, before anything is sent:
   * ContextLengthError (400) when the prompt and the tokens asked for exceed the context,
   * SamplingParamError (400) for a bad sampling value, PeerWaitError (503) when `--min-peers`
   * did not join in time, SessionLimitError (429) when every slot is taken, ShuttingDownError
   * (503) once `abortAll` began, SpeculationUnavailableError (400) for `speculate: 'draft'`
   * without a draft model, EmptyPromptError (400) for a prompt of no tokens, what
   * `compileConstraint` throws, and the signal's reason when it aborts while waiting.
   */
  async open(request: SessionRequest, signal?: AbortSignal): Promise<RouteSession> {
    try {
      return await this.admit(request, signal);
    } catch (error) {
      request.constraint?.dispose(); // no session will own it
      throw error;
    }
  }

  private async admit(request: SessionRequest, signal?: AbortSignal): Promise<RouteSession> {
    if (this.shuttingDown) throw new ShuttingDownError();
    signal?.throwIfAborted();
    if (request.promptIds.length === 0) throw new EmptyPromptError();
    const { limits } = this.options;
    const maxTokens = completionBudget(limits, request.promptIds.length, request.maxTokens, limits.defaultMaxTokens);
    const params = validateSamplingParams({ ...request.sampling, maxTokens, stopTokenIds: limits.stopTokenIds });
    const speculate = request.speculate ?? this.options.speculate ?? 'ngram';
    if (!(this.options.session.drafters ?? new Drafters()).has(speculate)) throw new SpeculationUnavailableError(speculate);
    await this.waitForPeers(signal);
    signal?.throwIfAborted();
    if (this.shuttingDown) throw new ShuttingDownError();
    if (this.slots >= this.options.maxSessions) {
      const error = new SessionLimitError(this.options.maxSessions);
      this.options.observer?.refused?.(error);
      throw error;
    }
    this.slots++;
    let constraint = request.constraint;
    if (request.compileConstraint) {
      try {
        constraint = await request.compileConstraint();
        signal?.throwIfAborted();
        if (this.shuttingDown) throw new ShuttingDownError();
      } catch (error) {
        constraint?.dispose();
        this.slots--;
        throw error;
      }
    }
    const label = request.label ?? request.sessionId;
    const observer = this.options.observer;
    let holding = true;
    const session = new RouteSession(
      this.options.session,
      { sessionId: request.sessionId, promptIds: request.promptIds, params, stopStrings: request.stopStrings, speculate, constraint, naturalEnd: request.endNaturally ? limits.naturalEnd : undefined },
      signal,
      {
        onUpdate: (t) => {
          if (holding) observer?.updated?.(label, t);
        },
        onSettled: (t) => {
          // Runs synchronously in a client's abort, and before a finished session's releases.
          holding = false;
          this.slots--;
          observer?.finished?.(label, t);
        },
      },
    );
    this.tracked.add(session);
    void session.closed.then(() => this.tracked.delete(session));
    observer?.started?.(label, session.telemetry);
    return session;
  }

  /**
   * Shutdown: refuse new sessions, cancel every live one with `reason` (each ends as
   * `cancelled`, without trying repairs), and resolve once every one released its hops.
   */
  async abortAll(reason: unknown = new ShuttingDownError()): Promise<void> {
    this.shuttingDown = true;
    const sessions = [...this.tracked];
    for (const session of sessions) session.abort(reason);
    await Promise.all(sessions.map((session) => session.closed));
  }

  private async waitForPeers(signal?: AbortSignal): Promise<void> {
    const quorum = this.options.minPeers;
    if (!quorum || quorum.joined() >= quorum.count) return;
    await new Promise<void>((resolve, reject) => {
      const finish = (error?: unknown) => {
        off();
        cancel();
        signal?.removeEventListener('abort', onAbort);
        if (error === undefined) resolve();
        else reject(error);
      };
      const off = quorum.onChange(() => {
        if (quorum.joined() >= quorum.count) finish();
      });
      const onAbort = () => finish(signal!.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      const cancel = this.clock.setTimeout(() => finish(new PeerWaitError(quorum.count, quorum.joined(), quorum.waitMs)), quorum.waitMs);
    });
  }
}
