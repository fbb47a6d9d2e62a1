/** Parsing `--head-layers auto|none|START:END` on the command line (a usage error when malformed). */
import { parseHeadLayers as parse } from '../../core/mesh/head-layers.ts';
import { PlanError } from '../../core/mesh/plan-error.ts';
import type { LayerRange } from '../../core/model/types.ts';
import { UsageError } from './args.ts';

export function parseHeadLayers(value: string | undefined, fallback: 'auto' | 'none', numLayers: number): 'auto' | 'none' | LayerRange {
  if (value === undefined) return fallback;
  try {
    return parse(value, numLayers);
  } catch (error) {
    if (error instanceof PlanError) throw new UsageError(error.reason);
    throw error;
  }
}
