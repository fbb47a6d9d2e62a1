/**
 * How many tokens a session drafts for its next step: chosen from its running acceptance rate,
 * down to none when drafts keep failing. Pure and deterministic (it sees only which drafts
 * were kept, never the clock), so the same seed and the same speculation mode give the same
 * tokens.
 *
 * Model: each drafted token is kept with probability α, independently, until the first one
 * that is not (the rest of the draft is void). A step of k drafts then yields
 * E(k) = (1 − α^(k+1)) / (1 − α) tokens, and costs 1 + c·k times a plain step, where c is what
 * one more position costs relative to a whole step (its share of compute and of the head's
 * work; the round trip is paid once). k is the one that maximizes E(k) / (1 + c·k); k = 0 once
 * α ≤ c / (1 + c)… roughly α < c, where even one draft does not pay. α is estimated from the
 * kept and rejected drafts with a Beta(1, 1) prior and exponential forgetting, so it follows
 * a text whose predictability changes. While k is 0, every `probeEvery`-th step drafts one
 * token to find out whether the text became predictable again.
 */

export interface DraftLengthPolicy {
  /** Most tokens drafted per step (default 8). */
  readonly maxK: number;
  /** c: the cost of one more position relative to a plain step (default 0.1). */
  readonly costPerDraft: number;
  /** While k is 0, one step in this many drafts a single token (default 8). */
  readonly probeEvery: number;
  /** Weight kept by earlier evidence at each step (default 0.95: about the last 20 steps count). */
  readonly decay: number;
}

export const DEFAULT_DRAFT_LENGTH: DraftLengthPolicy = { maxK: 8, costPerDraft: 0.1, probeEvery: 8, decay: 0.95 };

export class DraftLength {
  private kept = 0; // discounted count of drafts kept
  private rejected = 0; // discounted count of drafts rejected (at most one per step)
  private idle = 0; // steps drafted with k = 0 since the last probe
  private readonly policy: DraftLengthPolicy;

  constructor(policy: Partial<DraftLengthPolicy> = {}) {
    this.policy = { ...DEFAULT_DRAFT_LENGTH, ...policy };
    const { maxK, costPerDraft, probeEvery, decay } = this.policy;
    if (!Number.isSafeInteger(maxK) || maxK < 0) throw new RangeError(`maxK must be an integer ≥ 0, got ${maxK}`);
    if (!(costPerDraft > 0)) throw new RangeError(`costPerDraft must be > 0, got ${costPerDraft}`);
    if (!Number.isSafeInteger(probeEvery) || probeEvery < 1) throw new RangeError(`probeEvery must be an integer ≥ 1, got ${probeEvery}`);
    if (!(decay > 0 && decay <= 1)) throw new RangeError(`decay must be in (0, 1], got ${decay}`);
  }

  /** Estimated probability that a drafted token is kept. */
  get acceptance(): number {
    return (this.kept + 1) / (this.kept + this.rejected + 2);
  }

  /** The draft length that pays best at the current estimate (0: no speculation). */
  get best(): number {
    const { maxK, costPerDraft: c } = this.policy;
    const alpha = this.acceptance;
    let bestK = 0;
    let bestGain = 1;
    let expected = 1; // E(k) = 1 + α + … + α^k
    let power = 1;
    for (let k = 1; k <= maxK; k++) {
      power *= alpha;
      expected += power;
      const gain = expected / (1 + c * k);
      if (gain > bestGain) (bestGain = gain), (bestK = k);
    }
    return bestK;
  }

  /** The length to draft for the next step. Call once per step, then `record` what happened. */
  next(): number {
    const k = this.best;
    if (k > 0 || this.policy.maxK === 0) {
      this.idle = 0;
      return k;
    }
    if (++this.idle < this.policy.probeEvery) return 0;
    this.idle = 0;
    return 1;
  }

  /** A step verified `drafted` tokens and kept the first `kept` of them. */
  record(drafted: number, kept: number): void {
    if (!Number.isSafeInteger(drafted) || drafted < 0 || !Number.isSafeInteger(kept) || kept < 0 || kept > drafted) {
      throw new RangeError(`cannot record ${kept} kept of ${drafted} drafted`);
    }
    if (drafted === 0) return; // nothing was learned
    const { decay } = this.policy;
    this.kept = this.kept * decay + kept;
    this.rejected = this.rejected * decay + (kept < drafted ? 1 : 0);
  }
}
