/** `--head-layers auto|none|START:END` as a plan option. Pure. */
import type { LayerRange } from '../model/types.ts';
import { PlanError } from './plan-error.ts';

/**
 * 'auto', 'none', or the half-open range `START:END` inside `[0, numLayers)`. Throws
 * PlanError('invalid_input') naming the value otherwise.
 */
export function parseHeadLayers(value: string, numLayers: number): 'auto' | 'none' | LayerRange {
  if (value === 'auto' || value === 'none') return value;
  const match = /^(\d+):(\d+)$/.exec(value);
  if (!match) throw new PlanError('invalid_input', `--head-layers: '${value}' is not auto, none or START:END`);
  const range = { start: Number(match[1]), end: Number(match[2]) };
  if (range.start >= range.end || range.end > numLayers) throw new PlanError('invalid_input', `--head-layers: [${range.start}, ${range.end}) is not a layer range inside [0, ${numLayers})`);
  return range;
}
