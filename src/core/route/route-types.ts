/**
 * What a Route Session reports: its events (tokens, the end) and its telemetry (hops,
 * repairs, releases). Plain data, shared with the HTTP edge and the dashboard. What it draws
 * from the mesh (RouteProvider, HopLease) is in mesh/route-provider.ts.
 */
import type { LayerRange } from '../model/types.ts';
import type { FinishReason, TokenLogprob } from '../sampling/index.ts';
import type { SpeculationTelemetry } from '../speculation/speculation.ts';
import type { HopFailureKind } from './hop-failure.ts';

export type RepairKind = 'cache_miss' | 'replaced';

/** Why a hop was repaired: a cache miss, or the HopFailureKind that made the session replace it. */
export type RepairCause = 'cache_miss' | Exclude<HopFailureKind, 'fatal' | 'cache_miss'>;

export interface RepairRecord {
  readonly kind: RepairKind;
  readonly cause: RepairCause;
  readonly hop: number;
  readonly range: LayerRange;
  readonly peerId: string; // the peer that served the hop after the repair
  readonly lostPeerId?: string; // for 'replaced'
  readonly position: number; // positions replayed
  readonly reason: string;
}

export interface HopTelemetry {
  peerId: string;
  readonly range: LayerRange;
  frames: number;
  tokens: number;
  totalMs: number;
  lastMs: number;
  /** Positions of KV this hop holds for the session (what the head last sent it). */
  kvPositions: number;
}

export type SessionOutcome = 'running' | 'finished' | 'cancelled' | 'error';

export interface SessionTelemetry {
  readonly sessionId: string;
  readonly startedAt: number; // ms since epoch
  promptTokens: number;
  completionTokens: number;
  timeToFirstTokenMs?: number;
  finishedAt?: number;
  outcome: SessionOutcome;
  error?: string;
  readonly hops: HopTelemetry[];
  readonly repairs: RepairRecord[];
  /** Drafting: the mode, draft length, steps (round trips), drafts verified and kept. */
  speculation?: SpeculationTelemetry;
  /** Per hop, what its release answered: KV entries freed (or the error). */
  readonly releases: { peerId: string; freedEntries?: number; keptPrefixes?: number; error?: string }[];
  /** Prompt positions taken from a prefix entry the hops held (not sent again). */
  cachedTokens?: number;
  /** Between hop i and i + 1 on the last step: `direct` (chained, hop to hop) or `head` (through the head). */
  links?: readonly ('direct' | 'head')[];
  /** Times the session moved to a new route because its own ran through a range no recent plan has (RouteProvider.offPlan). */
  moves?: number;
}

export interface Usage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Prompt tokens whose KV came from a prefix entry (OpenAI's `prompt_tokens_details.cached_tokens`). */
  readonly cachedTokens?: number;
}

export type SessionEvent =
  | {
      readonly type: 'token';
      readonly tokenId: number;
      /** New text to show (stop strings held back until they cannot match). */
      readonly text: string;
      readonly logprob: number;
      readonly topLogprobs: readonly TokenLogprob[];
    }
  | {
      readonly type: 'done';
      readonly finishReason: FinishReason;
      /** Text still held back, released at the end (never part of a stop string). */
      readonly text: string;
      readonly usage: Usage;
    };
