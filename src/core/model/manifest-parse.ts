/** Validating a shard manifest received from elsewhere (a head, a cache file). */
import { ARTIFACT_FORMAT, type ShardManifest } from './shard-artifact.ts';
import { parsePartName } from './part-name.ts';
import { partName } from './shard-artifact.ts';

export class ManifestError extends Error {
  override readonly name = 'ManifestError';
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

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
  if (!isInt(m.weightsLength)) fail('weightsLength is not a non-negative integer');
  if (!Array.isArray(m.segments)) fail('segments is not an array');
  const part = m.part as ShardManifest['part'];
  const name = typeof part === 'object' && part !== null ? safePartName(part, m.dtype as 'fp32') : undefined;
  if (!name || !parsePartName(name)) fail('part is not a valid layer range, embedding or head');
  for (const [i, s] of (m.segments as unknown[]).entries()) {
    const seg = s as Record<string, unknown>;
    if (typeof seg !== 'object' || seg === null || typeof seg.name !== 'string' || !isInt(seg.packedOffset) || !isInt(seg.packedLength)) {
      fail(`segments[${i}] is malformed`);
    }
    if ((seg.packedOffset as number) + (seg.packedLength as number) > (m.weightsLength as number)) fail(`segments[${i}] ends past weightsLength`);
  }
  return m as unknown as ShardManifest;
}

function safePartName(part: ShardManifest['part'], dtype: 'fp32'): string | undefined {
  try {
    if (part.kind === 'layers' && !(isInt(part.range?.start) && isInt(part.range?.end))) return undefined;
    return partName(part, dtype);
  } catch {
    return undefined;
  }
}
