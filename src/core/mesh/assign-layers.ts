/**
 * Split a model's layers among participants in proportion to their weights (exo-style
 * placement, as a pure function). Largest-remainder (Hamilton) rounding with a floor of one
 * layer each.
 */
import type { LayerRange } from '../model/types.ts';
import { PlanError } from './plan-error.ts';

/**
 * Contiguous ranges covering `[0, numLayers)` exactly once, one per weight and in the order
 * given, each holding at least one layer and otherwise `numLayers × w / Σw` layers rounded by
 * largest remainder.
 *
 * Rules, so results are predictable:
 * - A participant whose exact share is below one layer gets exactly one; the remaining layers
 *   are shared among the others by the same rule (repeated until every share is ≥ 1).
 * - Layers left after rounding down go to the largest fractional remainders; equal remainders
 *   go to the earlier participant. So `[1, 1]` over 5 layers gives sizes 3, 2 and `[3, 1]`
 *   over 8 gives 6, 2.
 * - With integer weights (layer capacities) the arithmetic is exact and no participant gets
 *   more than `ceil(exact share)` layers.
 *
 * Throws PlanError('invalid_input') when there are no weights, more weights than layers,
 * `numLayers` is not a positive integer, or a weight is not a positive finite number.
 */
export function assignLayers(numLayers: number, weights: readonly number[]): LayerRange[] {
  const sizes = layerCounts(numLayers, weights);
  const ranges: LayerRange[] = [];
  let start = 0;
  for (const size of sizes) {
    ranges.push({ start, end: start + size });
    start += size;
  }
  return ranges;
}

/** The sizes `assignLayers` would give, in order. Same contract and errors. */
export function layerCounts(numLayers: number, weights: readonly number[]): number[] {
  if (!Number.isSafeInteger(numLayers) || numLayers < 1) {
    throw new PlanError('invalid_input', `the layer count must be a positive integer, got ${numLayers}`);
  }
  if (weights.length === 0) throw new PlanError('invalid_input', 'no participants to hold layers');
  if (weights.length > numLayers) {
    throw new PlanError('invalid_input', `${weights.length} participants cannot each hold one of ${numLayers} layers`);
  }
  weights.forEach((w, i) => {
    if (typeof w !== 'number' || !Number.isFinite(w) || w <= 0) {
      throw new PlanError('invalid_input', `weight ${i} must be a positive finite number, got ${String(w)}`);
    }
  });

  const sizes: number[] = weights.map(() => 0);
  // Fix at one layer everyone whose share is below one, then re-share the rest. Terminates:
  // the average share of the unfixed is ≥ 1 (layers ≥ participants), so someone stays unfixed.
  let open = weights.map((_, i) => i);
  let layers = numLayers;
  for (;;) {
    const total = sum(open.map((i) => weights[i]));
    const small = open.filter((i) => layers * weights[i] < total); // share < 1
    if (small.length === 0) break;
    for (const i of small) sizes[i] = 1;
    layers -= small.length;
    open = open.filter((i) => sizes[i] === 0);
  }

  // Hamilton over the open participants. Shares are numerator / total, compared on numerators
  // so that integer weights never meet floating-point rounding.
  const total = sum(open.map((i) => weights[i]));
  const remainders: { index: number; remainder: number }[] = [];
  let given = 0;
  for (const i of open) {
    const numerator = layers * weights[i];
    let whole = Math.floor(numerator / total);
    // Fractional weights: keep 0 ≤ remainder < total despite rounding in the division.
    if (whole * total > numerator) whole -= 1;
    else if ((whole + 1) * total <= numerator) whole += 1;
    sizes[i] = whole;
    given += whole;
    remainders.push({ index: i, remainder: numerator - whole * total });
  }
  remainders.sort((a, b) => b.remainder - a.remainder || a.index - b.index);
  for (let k = 0; k < layers - given; k++) sizes[remainders[k].index] += 1;
  return sizes;
}

function sum(values: readonly number[]): number {
  let total = 0;
  for (const v of values) total += v;
  return total;
}
