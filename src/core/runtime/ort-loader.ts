/**
 * Turning shard artifacts into running executors on an injected onnxruntime module:
 * load the packed weights from the checkpoint, create the session on the first provider
 * that works, and wrap it.
 */
import type { ByteSource } from '../model/byte-source.ts';
import { loadShardWeights, type ShardArtifact, type ShardManifest } from '../model/shard-artifact.ts';
import { presentKeyName, presentValueName } from '../model/shard-graph.ts';
import type { ActivationDtype } from '../model/activations.ts';
import type { ModelConfig } from '../model/types.ts';
import { OrtHeadRunner } from './ort-head-runner.ts';
import { createOrtSession, type CreatedSession, type OrtModule, type OrtSessionOptions, type PackedWeights } from './ort-session.ts';
import { OrtShardExecutor, type KvMode } from './ort-shard-executor.ts';
import type { RunQueue } from './run-queue.ts';

export interface OrtLoaderOptions {
  readonly ort: OrtModule;
  readonly providers: readonly string[];
  readonly intraOpThreads?: number;
  readonly extra?: Record<string, unknown>;
  /** Keep KV outputs on the GPU when the provider is WebGPU. */
  readonly kvOnGpu?: boolean;
  /**
   * How executors keep KV (see KvState): default 'pool' on CPU and wasm, 'replace' where it
   * stays on the GPU. 'replace' on CPU is the unpooled path (every step returns the whole
   * present KV), kept as the reference the pool is tested against.
   */
  readonly kvMode?: KvMode;
  /**
   * Every executor this loader creates runs its sessions through this queue, one call at a
   * time (onnxruntime-web refuses concurrent runs; see RunQueue). Absent: runs may overlap.
   */
  readonly runQueue?: RunQueue;
  /**
   * A part's packed weights where the runtime keeps them: Node's artifact cache holds
   * `weights.bin`, handed to onnxruntime-node as the folder (see PackedWeights) or read into
   * memory for the wasm runtime. Without it the weights are packed in memory from the checkpoint.
   */
  readonly weights?: (artifact: ShardArtifact) => Promise<PackedWeights>;
  /** onnxruntime-node reads `weights.bin` from a folder; the wasm runtime needs the bytes. */
  readonly weightsFromFolder?: boolean;
}

async function openWithWeights(graph: Uint8Array, weights: PackedWeights, options: OrtLoaderOptions, gpuOutputs: string[] = []): Promise<CreatedSession> {
  const sessionOptions: OrtSessionOptions = {
    providers: options.providers,
    intraOpThreads: options.intraOpThreads,
    extra: options.extra,
    gpuOutputs: options.kvOnGpu ? gpuOutputs : undefined,
  };
  return createOrtSession(options.ort, graph, weights, sessionOptions);
}

/** A part's packed weights: as a file where the runtime offers one (see PackedWeights), else in memory. */
async function packedWeights(artifact: ShardArtifact, source: ByteSource, options: OrtLoaderOptions): Promise<PackedWeights> {
  return options.weights ? options.weights(artifact) : loadShardWeights(artifact.manifest, source);
}

async function open(artifact: ShardArtifact, source: ByteSource, options: OrtLoaderOptions, gpuOutputs: string[] = []): Promise<CreatedSession> {
  return openWithWeights(artifact.graph, await packedWeights(artifact, source, options), options, gpuOutputs);
}

/** The config fields a shard executor needs (what an `assign` message carries). */
export type ShardShape = Pick<ModelConfig, 'hiddenSize' | 'numKvHeads' | 'headDim'>;

/** An executor from an artifact whose packed weights are already in memory (e.g. fetched from the head). */
export async function createShardExecutor(
  shape: ShardShape,
  manifest: ShardManifest,
  graph: Uint8Array,
  weights: PackedWeights,
  options: OrtLoaderOptions,
): Promise<OrtShardExecutor> {
  const { part, dtype } = manifest;
  if (part.kind !== 'layers') throw new RangeError(`artifact holds the ${part.kind}, not layers`);
  if (weights instanceof Uint8Array && weights.byteLength !== manifest.weightsLength) {
    throw new RangeError(`shard weights have ${weights.byteLength} bytes, the manifest says ${manifest.weightsLength}`);
  }
  const gpuOutputs: string[] = [];
  for (let l = part.range.start; l < part.range.end; l++) gpuOutputs.push(presentKeyName(l), presentValueName(l));
  const { session, provider } = await openWithWeights(graph, weights, options, gpuOutputs);
  return new OrtShardExecutor(options.ort, session, shape, part.range, dtype, provider, manifest.weights, manifest.weightsLength, options.runQueue, options.kvMode, undefined, manifest.window);
}

/** An executor for a layers artifact, reading its weights from the checkpoint. */
export async function loadShardExecutor(
  shape: ShardShape,
  artifact: ShardArtifact,
  source: ByteSource,
  options: OrtLoaderOptions,
): Promise<OrtShardExecutor> {
  const weights = await packedWeights(artifact, source, options);
  return createShardExecutor(shape, artifact.manifest, artifact.graph, weights, options);
}

export async function loadHeadRunner(
  config: ModelConfig,
  embedding: ShardArtifact,
  head: ShardArtifact,
  source: ByteSource,
  options: OrtLoaderOptions,
): Promise<OrtHeadRunner> {
  const dtype: ActivationDtype = head.manifest.dtype;
  const e = await open(embedding, source, options);
  const h = await open(head, source, { ...options, providers: [e.provider] });
  return new OrtHeadRunner(options.ort, e.session, h.session, config.hiddenSize, config.vocabSize, dtype, e.provider);
}
