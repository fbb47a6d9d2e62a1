/** Slicing activation blocks by position. */
import type { Activations } from '../runtime/shard-executor.ts';

/** The last `tokens` positions of `a` (a view when it is already that long). */
export function lastPositions(a: Activations, tokens: number): Activations {
  if (tokens === a.tokens) return a;
  if (tokens > a.tokens) throw new RangeError(`cannot take ${tokens} positions of a ${a.tokens}-position block`);
  const data = a.data.subarray((a.tokens - tokens) * a.hiddenSize);
  return { dtype: a.dtype, data: data as Float32Array | Uint16Array, tokens, hiddenSize: a.hiddenSize };
}
