/**
 * What a Route Session is given: what every session of a head shares (`RouteSessionDeps`,
 * one object the session table passes through as it is), how hard it tries
 * (`SessionPolicy`), the request itself, and who hears of it (`SessionHooks`).
 */
import type { NaturalEnd } from '../model/generation-limits.ts';
import type { RouteProvider } from '../mesh/route-provider.ts';
import type { TextTokenizer } from '../model/tokenizer.ts';
import type { Clock } from '../runtime/clock.ts';
import type { HeadRunner } from '../runtime/ort-head-runner.ts';
import type { SamplerFactory, SamplingParams, TokenConstraint } from '../sampling/index.ts';
import type { DraftLengthPolicy } from '../speculation/draft-length.ts';
import type { SpeculateMode } from '../speculation/drafter.ts';
import type { Drafters } from '../speculation/drafters.ts';
import type { RouteMode } from './chain-route.ts';
import type { PrefixRegistry } from './prefix-registry.ts';
import type { SessionTelemetry } from './route-types.ts';
import type { HopVerifier } from './verify-hop.ts';

/** How hard a session tries before it gives up on a hop, and how it cuts and guesses. */
export interface SessionPolicy {
  /** Replacements tried per hop per step before the route counts as unavailable (default 3). */
  readonly maxReplacements?: number;
  /** Cache-miss rebuilds per hop per step before the hop counts as lost (default 2). */
  readonly maxRebuilds?: number;
  /** Back-off before each replacement (default 50 ms doubling to 1 s). */
  readonly backoff?: { readonly baseMs: number; readonly maxMs: number };
  /** Release (and fork) answers are awaited this long, in the background (default 5 s). */
  readonly releaseTimeoutMs?: number;
  /**
   * `--hop-timeout`: the ceiling of every frame's deadline, which follows the hop's recent
   * latency (HopLatency: DEADLINE_SLACK × its p99, never below the floor). Undefined: no
   * deadlines (complete-model mode has nobody to replace).
   */
  readonly hopTimeoutMs?: number;
  /** The floor of the adaptive deadline, ms (default DEADLINE_FLOOR_MS, 1 s). */
  readonly hopFloorMs?: number;
  /**
   * Tokens per chunk of a pipelined prefill (`--prefill-chunk`); 0: never pipelined; default:
   * about 4 chunks per hop (see `prefillChunkSize`). A route of one hop is never pipelined.
   */
  readonly prefillChunk?: number;
  /**
   * How activations travel (`--route-mode`): `star` (default for now) head → hop → head for
   * every hop; `chain` / `auto` hop to hop wherever the peers run chained routes and can be
   * reached, through the head elsewhere (chain-route.ts).
   */
  readonly routeMode?: RouteMode;
  /** How the draft length adapts (default: up to 8 drafts, see DraftLength). */
  readonly draftLength?: Partial<DraftLengthPolicy>;
}

/** What every session of a head shares. */
export interface RouteSessionDeps {
  readonly head: HeadRunner;
  readonly route: RouteProvider;
  readonly vocabSize: number;
  /** Turns tokens into text deltas; without it events carry empty text. */
  readonly tokenizer?: TextTokenizer;
  readonly policy?: SessionPolicy;
  /** Time and timers (deadlines, back-off, telemetry); the system clock by default. */
  readonly clock?: Clock;
  /** Where drafters come from (default: prompt lookup only). */
  readonly drafters?: Drafters;
  /**
   * Prefix reuse: start from the longest prefix entry the route's hops hold (fork, then
   * prefill only the rest), and leave a finished session's KV behind as a new entry.
   */
  readonly prefixes?: PrefixRegistry;
  /** `--verify`: checks a sampled share of hop answers against a replay elsewhere (verify-hop.ts). */
  readonly verifier?: HopVerifier;
  /** Where each sequence's tokens are sampled (default: a Sampler on this thread; the Node head: a worker). */
  readonly samplers?: SamplerFactory;
}

export interface RouteSessionRequest {
  readonly sessionId: string; // a lowercase UUID
  readonly promptIds: readonly number[];
  readonly params: SamplingParams;
  readonly stopStrings?: readonly string[];
  /** Ends the answer after a natural end token (the model's `meshnet_natural_end`); unconstrained answers only. */
  readonly naturalEnd?: NaturalEnd;
  /** How this session drafts (default 'ngram'); 'draft' needs `deps.drafters` with a draft model. */
  readonly speculate?: SpeculateMode;
  /**
   * Restricts every sampled token (JSON schema, tool-call grammar). The session owns it from
   * here: each step's mask and chosen token go through it (`TokenOutput`), and it is disposed
   * when the session's outcome is settled (finish, error or abort).
   */
  readonly constraint?: TokenConstraint;
}

/** Who hears of one session. */
export interface SessionHooks {
  /** Observes telemetry changes (dashboard, metrics): after every frame a hop answers, every token, every repair and the close. */
  readonly onUpdate?: (telemetry: SessionTelemetry) => void;
  /** Called once, synchronously, when the outcome is recorded (before the hops are released). */
  readonly onSettled?: (telemetry: SessionTelemetry) => void;
}
