/**
 * Turning shard artifacts into running executors on an injected onnxruntime module:
 * load the packed weights from the checkpoint, create the session on the first provider
 * that works, and wrap it.
 */
import type { ByteSource } from './byte-source.ts';
import { loadShardWeights, type ShardArtifact } from '../model/shard-artifact.ts';
import { presentKeyName, presentValueName, type ActivationDtype } from '../model/shard-graph.ts';
import type { ModelConfig } from '../model/types.ts';
import { OrtHeadRunner } from './ort-head-runner.ts';
import { createOrtSession, type CreatedSession, type OrtModule, type OrtSessionOptions } from './ort-session.ts';
import { OrtShardExecutor } from './ort-shard-executor.ts';

export interface OrtLoaderOptions {
  readonly ort: OrtModule;
  readonly providers: readonly string[];
  readonly intraOpThreads?: number;
  readonly extra?: Record<string, unknown>;
  /** Keep KV outputs on the GPU when the provider is WebGPU. */
  readonly kvOnGpu?: boolean;
}

async function open(artifact: ShardArtifact, source: ByteSource, options: OrtLoaderOptions, gpuOutputs: string[] = []): Promise<CreatedSession> {
  const weights = await loadShardWeights(artifact.manifest, source);
  const sessionOptions: OrtSessionOptions = {
    providers: options.providers,
    intraOpThreads: options.intraOpThreads,
    extra: options.extra,
    gpuOutputs: options.kvOnGpu ? gpuOutputs : undefined,
  };
  return createOrtSession(options.ort, artifact.graph, weights, sessionOptions);
}

export async function loadShardExecutor(
  config: ModelConfig,
  artifact: ShardArtifact,
  source: ByteSource,
  options: OrtLoaderOptions,
): Promise<OrtShardExecutor> {
  const { part, dtype } = artifact.manifest;
  if (part.kind !== 'layers') throw new RangeError(`artifact holds the ${part.kind}, not layers`);
  const gpuOutputs: string[] = [];
  for (let l = part.range.start; l < part.range.end; l++) gpuOutputs.push(presentKeyName(l), presentValueName(l));
  const { session, provider } = await open(artifact, source, options, gpuOutputs);
  return new OrtShardExecutor(options.ort, session, config, part.range, dtype, provider);
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
