/**
 * ShardLoader for a Node peer: fetches the assigned artifact from the head over HTTP into
 * its own artifact cache (reused when already there, e.g. a local peer sharing the head's
 * MESHNET_HOME), validates the manifest, and opens the executor.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomUUID } from 'node:crypto';
import { parseShardManifest } from '../../core/model/manifest-parse.ts';
import type { ShardManifest } from '../../core/model/shard-artifact.ts';
import { assignedWeights, checkAssignedWeights, type ShardLoader } from '../../core/peer/shard-loader.ts';
import { createShardExecutor } from '../../core/runtime/ort-loader.ts';
import { WEIGHTS_FILE } from '../../core/model/shard-artifact.ts';
import type { ShardExecutor } from '../../core/runtime/shard-executor.ts';
import type { AssignMessage } from '../../shared/control.ts';
import { ARTIFACT_TOKEN_HEADER } from '../../shared/protocol.ts';
import { artifactDirectory, findReusableWeights, linkOrCopy } from '../artifact-cache.ts';
import { meshnetHome } from '../meshnet-home.ts';
import { describeProviders, nodeLoaderOptions } from '../ort-node-runtime.ts';

export interface HttpLoaderOptions {
  readonly origin: string; // the head's http origin
  readonly joinToken?: string;
  readonly device: string;
  readonly threads?: number;
  readonly home?: string;
  readonly log?: (line: string) => void;
}

async function cached(dir: string, assign: AssignMessage): Promise<ShardManifest | undefined> {
  try {
    const manifest = parseShardManifest(JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8')), dir);
    const weights = await stat(path.join(dir, WEIGHTS_FILE));
    await stat(path.join(dir, 'graph.onnx'));
    if (manifest.modelKey !== assign.modelKey || weights.size !== manifest.weightsLength) return undefined;
    checkAssignedWeights(assign, manifest.weights, `the cached artifact ${dir}`);
    return manifest;
  } catch {
    return undefined;
  }
}

export function httpShardLoader(options: HttpLoaderOptions): ShardLoader {
  const headers: Record<string, string> = options.joinToken ? { [ARTIFACT_TOKEN_HEADER]: options.joinToken } : {};
  const get = async (url: URL) => {
    const response = await fetch(url, { headers });
    if (!response.ok) throw new Error(`GET ${url.pathname}: HTTP ${response.status} ${await response.text().catch(() => '')}`.trim());
    return response;
  };

  async function download(dir: string, base: URL, assign: AssignMessage): Promise<ShardManifest> {
    const file = (name: string) => new URL(`${base.pathname.replace(/\/$/, '')}/${name}`, base);
    const manifest = parseShardManifest(await (await get(file('manifest.json'))).json(), `${base.pathname}/manifest.json`);
    const { part } = manifest;
    if (manifest.modelKey !== assign.modelKey || manifest.dtype !== assign.dtype || part.kind !== 'layers' || part.range.start !== assign.range.start || part.range.end !== assign.range.end) {
      throw new Error(`the head sent the artifact of another part (${JSON.stringify(part)}) for layers [${assign.range.start}, ${assign.range.end})`);
    }
    checkAssignedWeights(assign, manifest.weights, `the head's artifact ${base.pathname}`);
    const staging = `${dir}.download-${randomUUID()}`;
    await mkdir(staging, { recursive: true });
    try {
      await writeFile(path.join(staging, 'graph.onnx'), new Uint8Array(await (await get(file('graph.onnx'))).arrayBuffer()));
      // Only the graph differs between accuracy levels: reuse weights this peer already holds.
      const reusable = await findReusableWeights(dir, manifest);
      if (reusable) await linkOrCopy(reusable, path.join(staging, WEIGHTS_FILE));
      else {
        const weights = await get(file(WEIGHTS_FILE));
        await pipeline(Readable.fromWeb(weights.body! as never), createWriteStream(path.join(staging, WEIGHTS_FILE)));
      }
      const size = (await stat(path.join(staging, WEIGHTS_FILE))).size;
      if (size !== manifest.weightsLength) throw new Error(`weights.bin has ${size} bytes, the manifest says ${manifest.weightsLength}`);
      await writeFile(path.join(staging, 'manifest.json'), JSON.stringify(manifest));
      await rm(dir, { recursive: true, force: true });
      await mkdir(path.dirname(dir), { recursive: true });
      await rename(staging, dir);
    } catch (error) {
      await rm(staging, { recursive: true, force: true });
      throw error;
    }
    return manifest;
  }

  let described = false;
  return {
    async load(assign: AssignMessage): Promise<ShardExecutor> {
      const dir = artifactDirectory(assign.modelKey, { kind: 'layers', range: assign.range }, assign.dtype, assignedWeights(assign), options.home ?? meshnetHome());
      const started = Date.now();
      const manifest = (await cached(dir, assign)) ?? (await download(dir, new URL(assign.artifactUrl, options.origin), assign));
      const graph = new Uint8Array(await readFile(path.join(dir, 'graph.onnx')));
      const loader = await nodeLoaderOptions({ device: options.device, dtype: assign.dtype, threads: options.threads });
      // onnxruntime-node reads weights.bin from the folder; the wasm runtime takes bytes.
      const weights = loader.weightsFromFolder ? { folder: dir } : new Uint8Array(await readFile(path.join(dir, WEIGHTS_FILE)));
      const executor = await createShardExecutor(assign.config, manifest, graph, weights, loader);
      // The first load says why other providers were skipped: once per peer process.
      const device = described ? executor.device : describeProviders(options.device, executor.device, loader.skipped);
      described = true;
      options.log?.(`loaded layers [${assign.range.start}, ${assign.range.end}) on ${device} in ${Date.now() - started} ms`);
      return executor as ShardExecutor;
    },
  };
}
