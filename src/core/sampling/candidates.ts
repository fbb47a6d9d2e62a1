/**
 * The truncated, renormalized distribution a token is drawn from:
 * temperature → top-k → softmax → top-p → min-p → renormalize.
 */

import type { SamplingParams } from './params.ts';
import { selectTopN } from './select.ts';

export type FilterParams = Pick<SamplingParams, 'temperature' | 'topK' | 'topP' | 'minP'>;

/** Candidate tokens in sampling order; only the first `count` entries of each array are valid. */
export interface CandidateSet {
  readonly ids: Int32Array;
  /** Probabilities aligned with `ids`; the first `count` sum to 1. */
  readonly probs: Float64Array;
  readonly count: number;
}

/** Reusable buffers, each [vocab]; owned by one caller and overwritten on every call. */
export interface CandidateScratch {
  readonly ids: Int32Array;
  readonly weights: Float64Array;
  readonly keys: Float64Array;
}

export function createCandidateScratch(vocabSize: number): CandidateScratch {
  return {
    ids: new Int32Array(vocabSize),
    weights: new Float64Array(vocabSize),
    keys: new Float64Array(vocabSize),
  };
}

/**
 * Builds the sampling distribution from (already penalized) `logits` ([vocab]; -Infinity = masked,
 * no NaN / +Infinity). `temperature` must be > 0 (greedy is the caller's job).
 *
 * The kept set is exactly what a full sort by (logit descending, id ascending) followed by each
 * filter would keep; top-p ties at the boundary go to the lower ids. Sampling order of `ids`:
 * logit descending (ties to the lower id) when top-k is on, ascending id otherwise.
 *
 * Efficiency for large vocabularies: top-k uses a bounded heap, O(V log k). Without top-k nothing
 * is sorted with a comparator: min-p is a plain threshold, and top-p first drops tokens with
 * p < (1 − topP) / n (they can never be in the nucleus: together they weigh < 1 − topP), then
 * finds the boundary logit with a native numeric sort of the survivors' logits.
 * Returns arrays from `scratch` (valid until its next use). Throws RangeError if every logit is masked.
 */
export function selectCandidates(
  logits: Float64Array,
  params: FilterParams,
  scratch: CandidateScratch = createCandidateScratch(logits.length),
): CandidateSet {
  const { temperature, topK, topP, minP } = params;
  const { ids, weights } = scratch;
  const vocabSize = logits.length;
  const truncating = topP < 1 || minP > 0;

  let n = 0;
  let sorted = false;
  if (topK > 0 && topK < vocabSize) {
    n = selectTopN(logits, topK, ids);
    sorted = true;
  } else {
    for (let i = 0; i < vocabSize; i++) if (logits[i] !== -Infinity) ids[n++] = i;
  }
  if (n === 0) throw new RangeError('cannot sample: every logit is -Infinity');

  let max = -Infinity;
  for (let k = 0; k < n; k++) if (logits[ids[k]] > max) max = logits[ids[k]];
  // Softmax numerators relative to the top token (whose weight is exactly 1).
  let total = 0;
  for (let k = 0; k < n; k++) {
    const w = Math.exp((logits[ids[k]] - max) / temperature);
    weights[k] = w;
    total += w;
  }

  if (truncating) {
    n = sorted
      ? truncateSorted(weights, n, total, topP, minP)
      : truncateUnsorted(logits, max, temperature, total, n, params, scratch);
  }

  let kept = 0;
  for (let k = 0; k < n; k++) kept += weights[k];
  for (let k = 0; k < n; k++) weights[k] /= kept;
  return { ids, probs: weights, count: n };
}

/** Top-p then min-p over candidates already in descending order; returns the kept count. */
function truncateSorted(weights: Float64Array, n: number, total: number, topP: number, minP: number): number {
  let count = n;
  if (topP < 1) {
    const target = topP * total;
    let mass = 0;
    for (let k = 0; k < n; k++) {
      mass += weights[k];
      if (mass >= target) {
        count = k + 1; // the token crossing topP is included
        break;
      }
    }
  }
  // Weights are relative to the top token (weight 1), so min-p's cut is simply w ≥ minP.
  let k = 1;
  while (k < count && weights[k] >= minP) k++;
  return k;
}

/**
 * Top-p and min-p over candidates in ascending id order, compacting `ids` / `weights` in place
 * (order kept). Returns the kept count.
 */
function truncateUnsorted(
  logits: Float64Array,
  max: number,
  temperature: number,
  total: number,
  n: number,
  params: FilterParams,
  scratch: CandidateScratch,
): number {
  const { topP, minP } = params;
  const { ids, weights, keys } = scratch;
  // Prefilter, in weight units (p = w / total, pMax = 1 / total). Keeps the top token (w = 1).
  const floor = Math.max(topP < 1 ? ((1 - topP) / n) * total : 0, minP);
  let kept = 0;
  for (let k = 0; k < n; k++) {
    if (weights[k] < floor) continue;
    ids[kept] = ids[k];
    weights[kept] = weights[k];
    kept++;
  }
  if (topP === 1) return kept;

  // Walk the survivors' logits from the top, summing exactly the weights a sorted walk would.
  const sortedKeys = keys.subarray(0, kept);
  for (let k = 0; k < kept; k++) sortedKeys[k] = logits[ids[k]];
  sortedKeys.sort(); // typed arrays sort numerically, ascending
  const target = topP * total;
  let mass = 0;
  let position = kept - 1;
  for (; position > 0; position--) {
    mass += Math.exp((sortedKeys[position] - max) / temperature);
    if (mass >= target) break;
  }
  const boundary = sortedKeys[position];
  // Keep everything above the boundary logit, plus the lowest ids among those equal to it.
  let boundarySlots = 1;
  while (position + boundarySlots < kept && sortedKeys[position + boundarySlots] === boundary) {
    boundarySlots++;
  }
  let count = 0;
  for (let k = 0; k < kept; k++) {
    const l = logits[ids[k]];
    if (l < boundary || (l === boundary && boundarySlots-- <= 0)) continue;
    ids[count] = ids[k];
    weights[count] = weights[k];
    count++;
  }
  return count;
}
