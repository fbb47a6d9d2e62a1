/**
 * Prompt lookup decoding (Saxena 2023; vLLM's `ngram` speculator, Hugging Face's
 * `prompt_lookup_num_tokens`): the last n tokens of the context are looked up earlier in the
 * context (the prompt and the text so far), and what followed them there is the draft. No
 * second model. Longer n-grams are tried first (a longer match predicts better); among the
 * matches of one n the most recent wins (the nearest context). The continuation is copied
 * from the context *including the tokens it has already copied*, so a period that repeats
 * (greedy text falling into a loop, a repeated line) is drafted all the way to k tokens.
 */
import type { DraftToken, Drafter } from './drafter.ts';

export interface NgramOptions {
  /** Longest n-gram looked up (default 3). */
  readonly maxNgram?: number;
  /** Shortest n-gram looked up (default 1). */
  readonly minNgram?: number;
}

export class NgramDrafter implements Drafter {
  private readonly maxNgram: number;
  private readonly minNgram: number;

  constructor(options: NgramOptions = {}) {
    this.maxNgram = options.maxNgram ?? 3;
    this.minNgram = options.minNgram ?? 1;
    if (!Number.isSafeInteger(this.minNgram) || this.minNgram < 1 || !Number.isSafeInteger(this.maxNgram) || this.maxNgram < this.minNgram) {
      throw new RangeError(`n-gram lengths must be integers with 1 ≤ min ≤ max, got ${this.minNgram}…${this.maxNgram}`);
    }
  }

  async draft(context: readonly number[], k: number): Promise<DraftToken[]> {
    return lookupDraft(context, k, this.minNgram, this.maxNgram).map((tokenId) => ({ tokenId }));
  }

  async close(): Promise<void> {}
}

/** The prompt-lookup draft of up to `k` tokens for `context` (see the module comment). */
export function lookupDraft(context: readonly number[], k: number, minNgram = 1, maxNgram = 3): number[] {
  const length = context.length;
  if (k < 1) return [];
  for (let n = Math.min(maxNgram, length - 1); n >= minNgram; n--) {
    const suffix = length - n; // the n-gram is context[suffix, length)
    // The most recent earlier occurrence: starts at `start` < suffix.
    for (let start = suffix - 1; start >= 0; start--) {
      let i = 0;
      while (i < n && context[start + i] === context[suffix + i]) i++;
      if (i < n) continue;
      const draft: number[] = [];
      for (let j = 0; j < k; j++) {
        const at = start + n + j; // < length + j: inside the context or the draft so far
        draft.push(at < length ? context[at] : draft[at - length]);
      }
      return draft;
    }
  }
  return [];
}
