/**
 * On-disk cache of shard artifacts: `<MESHNET_HOME>/artifacts/<modelKey>/<part>/` holds
 * `graph.onnx`, `manifest.json` and the packed `weights.bin`, one folder per part, activation
 * dtype and weight format (e.g. `layers-0-4-fp32-q4-b32-acc4`), so a second start builds
 * nothing. A build streams the weights chunk by chunk into a temporary folder beside it
 * (`.building-<part>-<pid>-<uuid>`) and renames it into place at the end: a reader never sees
 * half an artifact, a failed build removes its folder, and one killed mid-build is swept by
 * the next build of that part once its process is gone. The MatMulNBits accuracy level is
 * a graph attribute only: folders that differ only in it (`…-acc0`, `…-acc4`) share one
 * `weights.bin` (hard-linked, or copied where links are refused), so switching the level
 * re-quantizes nothing.
 */
import { copyFile, link, mkdir, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Checkpoint } from '../core/model/checkpoint.ts';
import { parseShardManifest } from '../core/model/manifest-parse.ts';
import type { WeightSpec } from '../core/model/quant/weight-format.ts';
import type { AttentionKind } from '../core/model/shard-graph.ts';
import { buildShardArtifact, effectiveAttention, partName, shardWeightChunks, type ShardArtifact, type ShardManifest, type ShardPart } from '../core/model/shard-artifact.ts';
import type { ActivationDtype } from '../core/model/activations.ts';
import { WEIGHTS_FILE } from '../core/model/shard-artifact.ts';
import { meshnetHome } from './meshnet-home.ts';

export interface ArtifactCacheResult {
  readonly artifact: ShardArtifact;
  readonly directory: string;
  /** True when it was read from disk, false when built now. */
  readonly cached: boolean;
}

/** The cache folder of a part; a layers graph attending in place has its own (`…-inplace`), beside the GQA one it shares weights with. */
export function artifactDirectory(key: string, part: ShardPart, dtype: ActivationDtype, weights: WeightSpec, home = meshnetHome(), attention: AttentionKind = 'gqa'): string {
  return path.join(home, 'artifacts', key, partName(part, dtype, weights) + (attention === 'in-place' ? '-inplace' : ''));
}

/** The artifact in `directory` when it is whole (manifest, graph and weights of the right size) and for `key`. */
export async function readCachedArtifact(directory: string, key: string): Promise<ShardArtifact | undefined> {
  try {
    const manifest = parseShardManifest(JSON.parse(await readFile(path.join(directory, 'manifest.json'), 'utf8')), directory);
    if (manifest.modelKey !== key) return undefined;
    const weights = await stat(path.join(directory, WEIGHTS_FILE));
    if (!weights.isFile() || weights.size !== manifest.weightsLength) return undefined;
    const graph = new Uint8Array(await readFile(path.join(directory, 'graph.onnx')));
    return { manifest, graph };
  } catch {
    return undefined;
  }
}

const BUILDING = '.building-';

/** Remove temporary folders of `part` left by builds whose process is gone. */
async function sweepAbandoned(parent: string, part: string): Promise<void> {
  const entries = await readdir(parent).catch(() => [] as string[]);
  for (const entry of entries) {
    if (!entry.startsWith(`${BUILDING}${part}-`)) continue;
    const pid = Number(entry.slice(BUILDING.length + part.length + 1).split('-')[0]);
    if (!Number.isSafeInteger(pid) || pid === process.pid) continue;
    let alive = true;
    try {
      process.kill(pid, 0);
    } catch (error) {
      alive = (error as NodeJS.ErrnoException).code === 'EPERM';
    }
    if (!alive) await rm(path.join(parent, entry), { recursive: true, force: true });
  }
}

const ACCURACY_SUFFIX = /-acc\d$/;

/**
 * A whole `weights.bin` of a sibling folder that differs from `directory` only in the accuracy
 * level and holds the same packed segments as `manifest`, or undefined.
 */
export async function findReusableWeights(directory: string, manifest: ShardManifest): Promise<string | undefined> {
  const name = path.basename(directory);
  if (!ACCURACY_SUFFIX.test(name)) return undefined;
  const parent = path.dirname(directory);
  const stem = name.replace(ACCURACY_SUFFIX, '');
  const wanted = JSON.stringify(manifest.segments);
  for (const entry of await readdir(parent).catch(() => [] as string[])) {
    if (entry === name || entry.replace(ACCURACY_SUFFIX, '') !== stem || !ACCURACY_SUFFIX.test(entry)) continue;
    try {
      const other = JSON.parse(await readFile(path.join(parent, entry, 'manifest.json'), 'utf8')) as ShardManifest;
      const file = path.join(parent, entry, WEIGHTS_FILE);
      if (other.modelKey === manifest.modelKey && other.weightsLength === manifest.weightsLength && JSON.stringify(other.segments) === wanted && (await stat(file)).size === manifest.weightsLength) return file;
    } catch {
      // not a whole artifact: look further
    }
  }
  return undefined;
}

/** Put `from` (a whole weights file) at `to`: a hard link, or a copy where links are refused. */
export async function linkOrCopy(from: string, to: string): Promise<void> {
  try {
    await link(from, to);
  } catch {
    await copyFile(from, to);
  }
}

/** Write `artifact` and its packed weights (streamed from the checkpoint, or shared with a sibling) into `staging`. */
async function writeArtifact(staging: string, artifact: ShardArtifact, checkpoint: Checkpoint, reusable?: string): Promise<void> {
  await mkdir(staging, { recursive: true });
  await writeFile(path.join(staging, 'graph.onnx'), artifact.graph);
  if (reusable) {
    await linkOrCopy(reusable, path.join(staging, WEIGHTS_FILE));
    await writeFile(path.join(staging, 'manifest.json'), JSON.stringify(artifact.manifest));
    return;
  }
  const handle = await open(path.join(staging, WEIGHTS_FILE), 'w');
  try {
    for await (const { offset, bytes } of shardWeightChunks(artifact.manifest, checkpoint.source)) {
      await handle.write(bytes, 0, bytes.byteLength, offset);
    }
    await handle.truncate(artifact.manifest.weightsLength); // alignment padding after the last region
  } finally {
    await handle.close();
  }
  await writeFile(path.join(staging, 'manifest.json'), JSON.stringify(artifact.manifest));
}

/** The artifact of `part` in `weights`, from the cache or built (weights included) and stored. */
export async function getShardArtifact(
  checkpoint: Checkpoint,
  key: string,
  part: ShardPart,
  dtype: ActivationDtype,
  weights: WeightSpec,
  home = meshnetHome(),
  attention: AttentionKind = 'gqa',
): Promise<ArtifactCacheResult> {
  const kind = effectiveAttention(checkpoint.config, part, dtype, attention);
  const directory = artifactDirectory(key, part, dtype, weights, home, kind);
  const cached = await readCachedArtifact(directory, key);
  if (cached && (cached.manifest.attention ?? 'gqa') === kind) return { artifact: cached, directory, cached: true };

  const artifact = buildShardArtifact(checkpoint.config, checkpoint.tensors, key, part, dtype, weights, kind);
  const parent = path.dirname(directory);
  const name = path.basename(directory);
  await mkdir(parent, { recursive: true });
  await sweepAbandoned(parent, name);
  const staging = path.join(parent, `${BUILDING}${name}-${process.pid}-${randomUUID()}`);
  try {
    await writeArtifact(staging, artifact, checkpoint, await findReusableWeights(directory, artifact.manifest));
    await placeFolder(staging, directory, () => readCachedArtifact(directory, key).then(Boolean));
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    // Another process may have won the race; its artifact is as good as ours.
    const raced = await readCachedArtifact(directory, key);
    if (raced) return { artifact: raced, directory, cached: true };
    throw error;
  }
  return { artifact, directory, cached: false };
}

/**
 * Rename `staging` to `directory`. A folder already there is replaced only when `isValid`
 * says it is stale: a valid one may be another process's, which could be loading from it
 * right now. Throws when that folder was kept.
 */
export async function placeFolder(staging: string, directory: string, isValid: () => Promise<boolean>): Promise<void> {
  try {
    await rename(staging, directory); // fails with ENOTEMPTY / EEXIST when the folder has files
    return;
  } catch (error) {
    if (await isValid()) throw error; // the caller reads the other process's artifact
  }
  await rm(directory, { recursive: true, force: true });
  await rename(staging, directory);
}

/** The cached folder of `artifact` (holding `weights.bin`), for OrtLoaderOptions.weights. */
export function cachedArtifactDirectory(artifact: ShardArtifact, home = meshnetHome()): string {
  const { manifest } = artifact;
  return artifactDirectory(manifest.modelKey, manifest.part, manifest.dtype, manifest.weights, home, manifest.attention);
}
