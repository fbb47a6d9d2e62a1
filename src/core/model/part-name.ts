/** Parsing the part names artifacts are published under (`layers-0-4-fp32-q4-b32-acc4`, `head-fp16-fp16`). */
import { parseWeightSpecName, type WeightSpec } from './quant/weight-format.ts';
import type { ActivationDtype } from './activations.ts';
import type { ShardPart } from './shard-artifact.ts';

const PATTERN = /^(?:layers-(\d{1,5})-(\d{1,5})|(embedding|head))-(fp32|fp16)-([a-z0-9-]{4,16})$/;

/** The part, activation dtype and weight spec a name stands for, or undefined when it is not a valid part name. */
export function parsePartName(name: string): { part: ShardPart; dtype: ActivationDtype; weights: WeightSpec } | undefined {
  const match = PATTERN.exec(name);
  if (!match) return undefined;
  const dtype = match[4] as ActivationDtype;
  const weights = parseWeightSpecName(match[5]);
  if (!weights || (weights.format === 'fp32' && dtype === 'fp16')) return undefined;
  if (match[3]) return { part: { kind: match[3] as 'embedding' | 'head' }, dtype, weights };
  const start = Number(match[1]);
  const end = Number(match[2]);
  if (end <= start) return undefined;
  return { part: { kind: 'layers', range: { start, end } }, dtype, weights };
}
