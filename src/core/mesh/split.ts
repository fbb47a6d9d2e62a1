/** Layer ranges from split points: `[2, 4]` over 6 layers → [0,2) [2,4) [4,6). Pure. */
import type { LayerRange } from '../model/types.ts';

export function rangesFromSplit(numLayers: number, splits: readonly number[]): LayerRange[] {
  const points = [0, ...splits, numLayers];
  const ranges: LayerRange[] = [];
  for (let i = 0; i + 1 < points.length; i++) {
    const start = points[i];
    const end = points[i + 1];
    if (!Number.isInteger(start) || !Number.isInteger(end) || start >= end || end > numLayers) {
      throw new RangeError(`split points ${splits.join(',')} must be increasing integers inside (0, ${numLayers})`);
    }
    ranges.push({ start, end });
  }
  return ranges;
}
