/**
 * meshnet's weight formats, by name, as the bench tries them, and the llama.cpp GGUF type
 * each is compared with. fp32 is always there. The compact formats come with `--weights`
 * (issue #12): a format is tried when `meshnet generate --help` lists it after `--weights`,
 * and otherwise reported as "not available in this build" — never measured as fp32 under
 * another name, and never a crash.
 *
 * Contract with the engine: the format reaches meshnet as `weights: '<format>'` in
 * `loadLocalPipeline`'s options (one process) and in `startHead`'s options (pipelines; the
 * peers take what the head assigns). `meshnetWeightOptions` is the one place that spells it.
 */
import { parseWeightSpecName } from '../src/core/model/quant/weight-format.ts';
import { GENERATE_USAGE } from '../src/node/cli/generate-command.ts';
import type { GgufWeights } from './gguf/llama-gguf.ts';

export const MESHNET_WEIGHTS = ['fp32', 'fp16', 'q8', 'q4'] as const;
export type MeshnetWeights = (typeof MESHNET_WEIGHTS)[number];

/** The llama.cpp type each meshnet format is held against (same bits per weight, same block size for q8/q4). */
export const LLAMA_CPP_COUNTERPART: Readonly<Record<MeshnetWeights, GgufWeights>> = { fp32: 'F32', fp16: 'F16', q8: 'Q8_0', q4: 'Q4_0' };

/** The formats `usage` (a `meshnet generate` usage text) offers after `--weights`; fp32 alone when it has no such flag. */
export function weightsInUsage(usage: string): MeshnetWeights[] {
  const listed = /--weights\s+([a-z0-9|]+)/.exec(usage)?.[1].split('|') ?? [];
  return MESHNET_WEIGHTS.filter((w) => w === 'fp32' || listed.includes(w));
}

/** This build's formats, and a reason for each one it lacks. */
export function meshnetWeightsInThisBuild(): { available: MeshnetWeights[]; unavailable: { weights: MeshnetWeights; reason: string }[] } {
  const available = weightsInUsage(GENERATE_USAGE);
  const unavailable = MESHNET_WEIGHTS.filter((w) => !available.includes(w)).map((weights) => ({
    weights,
    reason: /--weights/.test(GENERATE_USAGE) ? `not available in this build (--weights does not list ${weights})` : 'not available in this build (meshnet has no --weights yet)',
  }));
  return { available, unavailable };
}

/** The options that ask meshnet for `weights` (nothing for fp32, which every build serves). */
export function meshnetWeightOptions(weights: MeshnetWeights | undefined): { readonly weights?: MeshnetWeights } {
  return weights === undefined || weights === 'fp32' ? {} : { weights };
}

/** `--q4-specs a,b`: q4 weight spec names (`q4-b64-acc4`), checked; undefined without the flag. */
export function parseQ4Specs(value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const names = value.split(',').map((n) => n.trim());
  for (const name of names) {
    if (parseWeightSpecName(name)?.format !== 'q4') throw new Error(`--q4-specs: '${name}' is not a q4 weight spec name (such as q4-b32-acc4 or q4-b64-acc4)`);
  }
  if (new Set(names).size !== names.length) throw new Error(`--q4-specs: '${value}' names a spec twice`);
  return names;
}
