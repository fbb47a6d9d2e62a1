/** Parsing the part names artifacts are published under (`layers-0-4-fp32`, `head-fp16`). */
import type { ActivationDtype } from './shard-graph.ts';
import type { ShardPart } from './shard-artifact.ts';

const PATTERN = /^(?:layers-(\d{1,5})-(\d{1,5})|(embedding|head))-(fp32|fp16)$/;

/** The part and dtype a name stands for, or undefined when it is not a valid part name. */
export function parsePartName(name: string): { part: ShardPart; dtype: ActivationDtype } | undefined {
  const match = PATTERN.exec(name);
  if (!match) return undefined;
  const dtype = match[4] as ActivationDtype;
  if (match[3]) return { part: { kind: match[3] as 'embedding' | 'head' }, dtype };
  const start = Number(match[1]);
  const end = Number(match[2]);
  if (end <= start) return undefined;
  return { part: { kind: 'layers', range: { start, end } }, dtype };
}
