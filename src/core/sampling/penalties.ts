/**
 * Logit penalties: repetition (HF / llama.cpp semantics) and presence / frequency (OpenAI
 * semantics). Pure over plain arrays; the caller owns the logits buffer being modified.
 */

import type { SamplingParams } from './params.ts';

/** The tokens a sequence has seen so far. Ids must lie in [0, vocabSize). */
export interface TokenHistory {
  /** Prompt token ids (after the chat template). */
  readonly prompt: readonly number[];
  /** Ids generated so far in this completion, oldest first. */
  readonly generated: readonly number[];
}

export type PenaltyParams = Pick<
  SamplingParams,
  'repetitionPenalty' | 'presencePenalty' | 'frequencyPenalty'
>;

function checkId(id: number, vocabSize: number, where: string): void {
  // `>>> 0` truncates fractions and wraps negatives, so only integers in [0, 2^32) survive.
  if (id >>> 0 !== id || id >= vocabSize) {
    throw new RangeError(`${where} token id ${id} is outside the vocabulary [0, ${vocabSize})`);
  }
}

/**
 * Applies the penalties to `logits` in place ([vocab]) and returns it.
 *
 * 1. Repetition, once per distinct id in prompt ∪ generated (r = repetitionPenalty):
 *    `l > 0 ? l / r : l * r` (so 0 stays 0 and -Infinity stays masked).
 * 2. Then presence / frequency over generated ids only, c = occurrences of the id:
 *    `l -= c * frequencyPenalty + (c > 0 ? presencePenalty : 0)`.
 *
 * Both steps are skipped when their parameters are "off" (1, 0, 0).
 * `counts` is optional scratch ([vocab], all zero on entry; left all zero on exit) so that a
 * caller sampling many tokens allocates nothing per call.
 * Throws RangeError when a history id is outside [0, logits.length).
 */
export function applyPenalties(
  logits: Float64Array,
  history: TokenHistory,
  params: PenaltyParams,
  counts: Uint32Array = new Uint32Array(logits.length),
): Float64Array {
  const vocabSize = logits.length;
  const { prompt, generated } = history;

  const penalty = params.repetitionPenalty;
  if (penalty !== 1) {
    for (const ids of [prompt, generated]) {
      for (const id of ids) {
        checkId(id, vocabSize, ids === prompt ? 'prompt' : 'generated');
        if (counts[id] !== 0) continue;
        counts[id] = 1;
        const l = logits[id];
        logits[id] = l > 0 ? l / penalty : l * penalty;
      }
    }
    for (const id of prompt) counts[id] = 0;
    for (const id of generated) counts[id] = 0;
  }

  const presence = params.presencePenalty;
  const frequency = params.frequencyPenalty;
  if (presence !== 0 || frequency !== 0) {
    for (const id of generated) {
      checkId(id, vocabSize, 'generated');
      counts[id] += 1;
    }
    for (const id of generated) {
      const c = counts[id];
      if (c === 0) continue; // already applied for an earlier occurrence
      logits[id] -= c * frequency + presence;
      counts[id] = 0;
    }
  }
  return logits;
}
