/**
 * Speculative sampling's acceptance rule (Leviathan et al. 2023; Chen et al. 2023): a token
 * drafted from a distribution q is checked against the target distribution p the sampler would
 * draw from. It is kept with probability min(1, p(d) / q(d)); otherwise a token is drawn from
 * the residual max(0, p − q), renormalized. Whatever q is, the token that comes out is
 * distributed exactly as p: P(x) = q(x)·min(1, p(x)/q(x)) + (1 − Σ min(p, q))·max(0, p(x) − q(x)) / Σ max(0, p − q) = p(x).
 *
 * A drafter that proposes one token for sure (prompt lookup, a greedy draft model) has q = a
 * point mass on it: the draft is kept with probability p(d), and a rejection draws from p
 * with d left out. Pure: the only randomness is the RNG handed in.
 */
import type { CandidateSet } from './candidates.ts';
import type { Rng } from './rng.ts';

/** A sparse distribution over token ids: `probs[i]` is the probability of `ids[i]` (the first `count`, default all). */
export interface DraftDistribution {
  readonly ids: ArrayLike<number>;
  readonly probs: ArrayLike<number>;
  readonly count?: number;
}

/** A drafted token and the distribution it was drawn from; without `q`, a point mass on `tokenId`. */
export interface DraftToken {
  readonly tokenId: number;
  readonly q?: DraftDistribution;
}

export interface VerifiedToken {
  readonly tokenId: number;
  /** True when the draft was kept; false when `tokenId` was drawn from the residual. */
  readonly accepted: boolean;
}

/**
 * Apply the rule to `draft` over `target` (the sampler's candidate set: ids with
 * probabilities summing to 1). `dense` is caller-owned scratch of [vocab] zeros, returned
 * zeroed. One RNG draw when the draft is kept, two when it is not. Throws RangeError when the
 * draft has probability 0 under its own q (it cannot have been drawn from it).
 */
export function verifyDraft(target: CandidateSet, draft: DraftToken, rng: Rng, dense: Float64Array): VerifiedToken {
  const { ids, probs, count } = target;
  const d = draft.tokenId;
  // q as a dense vector over the vocabulary (only its support is written, and cleared after).
  const q = draft.q;
  const qCount = q ? (q.count ?? q.ids.length) : 1;
  if (q) for (let i = 0; i < qCount; i++) dense[q.ids[i]] += q.probs[i];
  else dense[d] = 1;
  try {
    const qd = dense[d];
    if (!(qd > 0)) throw new RangeError(`draft token ${d} has probability ${qd} under the distribution it was drawn from`);
    let pd = 0;
    for (let k = 0; k < count; k++) if (ids[k] === d) pd = probs[k];
    if (rng.next() < pd / qd) return { tokenId: d, accepted: true };
    // Rejected: draw from max(0, p − q), renormalized, walking the candidates in sampling order.
    let total = 0;
    for (let k = 0; k < count; k++) total += Math.max(0, probs[k] - dense[ids[k]]);
    const r = rng.next() * total;
    let cumulative = 0;
    let lastPositive = -1;
    for (let k = 0; k < count; k++) {
      const w = Math.max(0, probs[k] - dense[ids[k]]);
      if (w <= 0) continue;
      cumulative += w;
      lastPositive = k;
      if (r < cumulative) return { tokenId: ids[k], accepted: false };
    }
    // p ≤ q everywhere up to rounding (then p(d)/q(d) ≈ 1 and the draft is kept but for the
    // last ulp), or r fell in the rounding gap just below the total.
    return lastPositive < 0 ? { tokenId: d, accepted: true } : { tokenId: ids[lastPositive], accepted: false };
  } finally {
    if (q) for (let i = 0; i < qCount; i++) dense[q.ids[i]] = 0;
    else dense[d] = 0;
  }
}
