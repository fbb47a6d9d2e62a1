/** Validating a shard manifest received from elsewhere (a head, a cache file). */
import { parseWeightSpecName, weightSpecName, type WeightSpec } from './quant/weight-format.ts';
import { parsePartName } from './part-name.ts';
import { ARTIFACT_FORMAT, partName, type ShardManifest } from './shard-artifact.ts';
import { segmentRegions, type WeightSegment } from './weight-segments.ts';

export class ManifestError extends Error {
  override readonly name = 'ManifestError';
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const SEGMENT_KINDS = ['float', 'quantize', 'gptq', 'awq', 'mxfp4'];

/** The manifest in `json`, or a ManifestError naming the first field that is wrong. */
export function parseShardManifest(json: unknown, source: string): ShardManifest {
  const fail = (problem: string): never => {
    throw new ManifestError(`${source}: ${problem}`);
  };
  if (typeof json !== 'object' || json === null || Array.isArray(json)) fail('the manifest is not a JSON object');
  const m = json as Record<string, unknown>;
  if (m.format !== ARTIFACT_FORMAT) fail(`format ${String(m.format)} is not ${ARTIFACT_FORMAT}`);
  if (typeof m.modelKey !== 'string' || !/^[0-9a-f]{16}$/.test(m.modelKey)) fail('modelKey is not a 16-digit hex key');
  if (m.dtype !== 'fp32' && m.dtype !== 'fp16') fail(`dtype ${String(m.dtype)} is not fp32 or fp16`);
  const weights = safeWeightSpec(m.weights);
  if (!weights) fail('weights is not a weight format (fp32, fp16, q8 or q4 with a block size and accuracy level)');
  if (!isInt(m.weightsLength)) fail('weightsLength is not a non-negative integer');
  if (!Array.isArray(m.segments)) fail('segments is not an array');
  const part = m.part as ShardManifest['part'];
  const name = typeof part === 'object' && part !== null ? safePartName(part, m.dtype as 'fp32', weights!) : undefined;
  if (!name || !parsePartName(name)) fail('part is not a valid layer range, embedding or head');
  for (const [i, s] of (m.segments as unknown[]).entries()) {
    const seg = s as Record<string, unknown>;
    if (typeof seg !== 'object' || seg === null || typeof seg.name !== 'string' || !SEGMENT_KINDS.includes(seg.kind as string)) fail(`segments[${i}] is malformed`);
    let regions: { offset: unknown; length: unknown }[];
    try {
      regions = segmentRegions(seg as unknown as WeightSegment);
    } catch {
      return fail(`segments[${i}] has no packed regions`);
    }
    for (const r of regions) {
      if (!r || !isInt(r.offset) || !isInt(r.length)) fail(`segments[${i}] has a malformed region`);
      if ((r.offset as number) + (r.length as number) > (m.weightsLength as number)) fail(`segments[${i}] ends past weightsLength`);
    }
  }
  if (m.window !== undefined) {
    const w = m.window as Record<string, unknown>;
    const range = part.kind === 'layers' ? part.range : undefined;
    const layersOk = range !== undefined && Array.isArray(w?.layers) && w.layers.length > 0 && w.layers.every((l) => isInt(l) && l >= range.start && l < range.end);
    if (typeof w !== 'object' || w === null || !isInt(w.size) || w.size < 1 || !layersOk) fail('window is not a positive size with layers inside the part\'s range');
  }
  if (m.attention !== undefined && (m.attention !== 'in-place' || part.kind !== 'layers')) fail(`attention ${String(m.attention)} is not 'in-place' on a layers part`);
  return m as unknown as ShardManifest;
}

function safeWeightSpec(value: unknown): WeightSpec | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (typeof v.format !== 'string' || !isInt(v.blockSize) || !isInt(v.accuracyLevel)) return undefined;
  const parsed = parseWeightSpecName(weightSpecName(v as unknown as WeightSpec));
  return parsed && parsed.format === v.format && (parsed.format === 'fp32' || parsed.format === 'fp16' || (parsed.blockSize === v.blockSize && parsed.accuracyLevel === v.accuracyLevel)) ? parsed : undefined;
}

function safePartName(part: ShardManifest['part'], dtype: 'fp32', weights: WeightSpec): string | undefined {
  try {
    if (part.kind === 'layers' && !(isInt(part.range?.start) && isInt(part.range?.end))) return undefined;
    return partName(part, dtype, weights);
  } catch {
    return undefined;
  }
}
