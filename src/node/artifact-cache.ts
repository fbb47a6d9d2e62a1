/**
 * On-disk cache of shard artifacts: `<MESHNET_HOME>/artifacts/<modelKey>/<part>/` holds
 * `graph.onnx` and `manifest.json`. Written to a temporary folder and renamed, so a reader
 * never sees half an artifact; a manifest that does not match is rebuilt. The packed
 * weights (`weights.bin`) are written there on first load, for onnxruntime-node to read.
 */
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Checkpoint } from '../core/model/checkpoint.ts';
import type { ByteSource } from '../core/model/byte-source.ts';
import { WEIGHTS_FILE } from '../core/model/shard-artifact.ts';
import { ARTIFACT_FORMAT, buildShardArtifact, partName, shardWeightSegments, type ShardArtifact, type ShardManifest, type ShardPart } from '../core/model/shard-artifact.ts';
import type { ActivationDtype } from '../core/model/shard-graph.ts';
import { meshnetHome } from './meshnet-home.ts';

export interface ArtifactCacheResult {
  readonly artifact: ShardArtifact;
  readonly directory: string;
  /** True when it was read from disk, false when built now. */
  readonly cached: boolean;
}

export function artifactDirectory(key: string, part: ShardPart, dtype: ActivationDtype, home = meshnetHome()): string {
  return path.join(home, 'artifacts', key, partName(part, dtype));
}

async function readCached(directory: string, key: string): Promise<ShardArtifact | undefined> {
  try {
    const manifest = JSON.parse(await readFile(path.join(directory, 'manifest.json'), 'utf8')) as ShardManifest;
    if (manifest.format !== ARTIFACT_FORMAT || manifest.modelKey !== key) return undefined;
    const graph = new Uint8Array(await readFile(path.join(directory, 'graph.onnx')));
    return { manifest, graph };
  } catch {
    return undefined;
  }
}

/** The artifact of `part`, from the cache or built and stored. */
export async function getShardArtifact(
  checkpoint: Checkpoint,
  key: string,
  part: ShardPart,
  dtype: ActivationDtype,
  home = meshnetHome(),
): Promise<ArtifactCacheResult> {
  const directory = artifactDirectory(key, part, dtype, home);
  const cached = await readCached(directory, key);
  if (cached) return { artifact: cached, directory, cached: true };

  const artifact = buildShardArtifact(checkpoint.config, checkpoint.tensors, key, part, dtype);
  const staging = `${directory}.tmp-${randomUUID()}`;
  await mkdir(staging, { recursive: true });
  try {
    await writeFile(path.join(staging, 'graph.onnx'), artifact.graph);
    await writeFile(path.join(staging, 'manifest.json'), JSON.stringify(artifact.manifest));
    await placeFolder(staging, directory, () => readCached(directory, key).then(Boolean));
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    // Another process may have won the race; its artifact is as good as ours.
    const raced = await readCached(directory, key);
    if (raced) return { artifact: raced, directory, cached: true };
    throw error;
  }
  return { artifact, directory, cached: false };
}

/**
 * Rename `staging` to `directory`. A folder already there is replaced only when `isValid`
 * says it is stale: a valid one may be another process's, which could be writing weights.bin
 * into it and loading from it right now. Throws when that folder was kept.
 */
async function placeFolder(staging: string, directory: string, isValid: () => Promise<boolean>): Promise<void> {
  try {
    await rename(staging, directory); // fails with ENOTEMPTY / EEXIST when the folder has files
    return;
  } catch (error) {
    if (await isValid()) throw error; // the caller reads the other process's artifact
  }
  await rm(directory, { recursive: true, force: true });
  await rename(staging, directory);
}

/**
 * The artifact folder of `artifact`, holding its packed weights as `weights.bin` (written
 * segment by segment on first use, to a temporary name then renamed). For
 * OrtLoaderOptions.weightsFolder.
 */
export async function shardWeightsFolder(artifact: ShardArtifact, source: ByteSource, home = meshnetHome()): Promise<string> {
  const { manifest } = artifact;
  const directory = artifactDirectory(manifest.modelKey, manifest.part, manifest.dtype, home);
  const file = path.join(directory, WEIGHTS_FILE);
  const existing = await stat(file).catch(() => undefined);
  if (existing?.isFile() && existing.size === manifest.weightsLength) return directory;

  await mkdir(directory, { recursive: true });
  const staging = `${file}.tmp-${randomUUID()}`;
  const handle = await open(staging, 'w');
  try {
    for await (const { segment, bytes } of shardWeightSegments(manifest, source)) {
      await handle.write(bytes, 0, bytes.byteLength, segment.packedOffset);
    }
    await handle.truncate(manifest.weightsLength); // alignment padding after the last segment
    await handle.close();
    await rename(staging, file);
  } catch (error) {
    await handle.close().catch(() => undefined);
    await rm(staging, { force: true });
    throw error;
  }
  return directory;
}
