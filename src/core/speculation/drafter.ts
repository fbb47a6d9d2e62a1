/**
 * The Drafter seam: what guesses the tokens a speculative step verifies. Two implementations:
 * prompt lookup (`NgramDrafter`, no second model) and a small draft model the head runs
 * itself (`ModelDrafter`). One drafter per session; the session owns it and closes it.
 */
import type { DraftToken } from '../sampling/index.ts';

export type { DraftToken } from '../sampling/index.ts';

/** How a session drafts: not at all, by prompt lookup, or with the draft model. */
export type SpeculateMode = 'off' | 'ngram' | 'draft';

export const SPECULATE_MODES: readonly SpeculateMode[] = ['off', 'ngram', 'draft'];

export function isSpeculateMode(value: unknown): value is SpeculateMode {
  return typeof value === 'string' && (SPECULATE_MODES as readonly string[]).includes(value);
}

export interface Drafter {
  /**
   * Up to `k` tokens guessed to follow `context` (the prompt and every token chosen so far;
   * its last token is the one the next step feeds), each with the distribution it was drawn
   * from when it was not a sure guess. Fewer, or none, when the drafter has no guess. The
   * context only ever grows by accepted tokens, but may lose what an earlier call guessed.
   */
  draft(context: readonly number[], k: number, signal?: AbortSignal): Promise<DraftToken[]>;
  /** Free what the drafter holds for its session (a draft model's KV). Idempotent. */
  close(): Promise<void>;
}
