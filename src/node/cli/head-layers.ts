/** Parsing `--head-layers auto|none|START:END`. */
import type { LayerRange } from '../../core/model/types.ts';
import { UsageError } from './args.ts';

export function parseHeadLayers(value: string | undefined, fallback: 'auto' | 'none', numLayers: number): 'auto' | 'none' | LayerRange {
  if (value === undefined) return fallback;
  if (value === 'auto' || value === 'none') return value;
  const match = /^(\d+):(\d+)$/.exec(value);
  if (!match) throw new UsageError(`--head-layers: '${value}' is not auto, none or START:END`);
  const range = { start: Number(match[1]), end: Number(match[2]) };
  if (range.start >= range.end || range.end > numLayers) throw new UsageError(`--head-layers: [${range.start}, ${range.end}) is not a layer range inside [0, ${numLayers})`);
  return range;
}
