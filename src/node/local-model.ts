/**
 * A model folder opened on this machine: its checkpoint, cache key and tokenizer, and the
 * in-process pipeline (complete-model mode) built from its cached shard artifacts.
 */
import path from 'node:path';
import { openCheckpoint, type Checkpoint } from '../core/model/checkpoint.ts';
import { modelKey } from '../core/model/model-key.ts';
import type { ActivationDtype } from '../core/model/activations.ts';
import { asWeightSpec, type WeightFormat, type WeightSpec } from '../core/model/quant/weight-format.ts';
import type { TextTokenizer } from '../core/model/tokenizer.ts';
import type { LayerRange } from '../core/model/types.ts';
import { KvStore } from '../core/runtime/kv-store.ts';
import { loadHeadRunner, loadShardExecutor, type OrtLoaderOptions } from '../core/runtime/ort-loader.ts';
import type { KvMode } from '../core/runtime/ort-shard-executor.ts';
import type { LocalPipeline, PipelineStage } from '../core/route/local-pipeline.ts';
import { inProcessRoute } from '../core/mesh/static-route.ts';
import { cpuAttention } from '../core/model/shard-artifact.ts';
import type { AttentionKind } from '../core/model/shard-graph.ts';
import { getShardArtifact } from './artifact-cache.ts';
import { createFileByteSource } from './file-byte-source.ts';
import { nodeLoaderOptions } from './ort-node-runtime.ts';
import { loadTokenizer } from './tokenizer-files.ts';

export interface LocalModel {
  readonly directory: string;
  readonly checkpoint: Checkpoint;
  readonly key: string;
}

export async function openLocalModel(directory: string): Promise<LocalModel> {
  const resolved = path.resolve(directory);
  const checkpoint = await openCheckpoint(createFileByteSource(resolved));
  return { directory: resolved, checkpoint, key: modelKey(checkpoint) };
}

export async function openLocalTokenizer(model: LocalModel, chatTemplateFile?: string): Promise<TextTokenizer> {
  return loadTokenizer(model.directory, { chatTemplateFile });
}

export interface PipelineOptions {
  readonly ranges: readonly LayerRange[];
  readonly device: string;
  readonly dtype: ActivationDtype;
  /** Weight format: a spec or a format name (default: the float format of `dtype`; q4 for AWQ/GPTQ). */
  readonly weights?: WeightSpec | WeightFormat;
  readonly threads?: number;
  /** Let idle onnxruntime threads spin (see NodeRuntimeOptions.spinning). */
  readonly spinning?: boolean;
  /** Memory (weights + KV) of each in-process peer, bytes (default: unlimited). */
  readonly memoryBudgetBytes?: number;
  /** onnxruntime module and providers to use instead of the Node table (e.g. the browser peer's). */
  readonly loader?: OrtLoaderOptions;
  /** How the layer executors keep KV (default: pooled on CPU and wasm, GPU buffers on WebGPU). */
  readonly kvMode?: KvMode;
  /** Prefix entries each in-process peer may keep, bytes (default 0: none). */
  readonly prefixBudgetBytes?: number;
  /** Batched decode across sessions on the in-process route (default true). */
  readonly batching?: boolean;
  /** How layer graphs attend (cached per kind): 'in-place' from plain ops over the past where a layer allows, 'gqa' GroupQueryAttention. Default: cpuAttention on onnxruntime-node's CPU provider, else GQA. */
  readonly attention?: AttentionKind;
}

export interface LoadedPipeline extends LocalPipeline {
  /** The execution provider each stage runs on, and the head's. */
  readonly devices: readonly string[];
  dispose(): Promise<void>;
}

export async function loadLocalPipeline(model: LocalModel, options: PipelineOptions): Promise<LoadedPipeline> {
  const { checkpoint, key } = model;
  const weights = asWeightSpec(checkpoint.config, options.dtype, options.weights);
  const loader = { ...(options.loader ?? (await nodeLoaderOptions(options))), ...(options.kvMode && { kvMode: options.kvMode }) };
  // Every session owns its thread pool: spinning pools of idle sessions (embedding, LM
  // head) would steal the cores the working one needs. Only the layer sessions spin.
  const headLoader = options.loader ?? (options.spinning ? await nodeLoaderOptions({ ...options, spinning: false }) : loader);
  const embedding = await getShardArtifact(checkpoint, key, { kind: 'embedding' }, options.dtype, weights);
  const headArtifact = await getShardArtifact(checkpoint, key, { kind: 'head' }, options.dtype, weights);
  const head = await loadHeadRunner(checkpoint.config, embedding.artifact, headArtifact.artifact, checkpoint.source, headLoader);
  const attention = options.attention ?? (!options.loader && options.device === 'cpu' ? cpuAttention(checkpoint.config) : 'gqa');
  const stages: PipelineStage[] = [];
  for (const range of options.ranges) {
    const part = { kind: 'layers', range } as const;
    const { artifact } = await getShardArtifact(checkpoint, key, part, options.dtype, weights, undefined, attention);
    const executor = await loadShardExecutor(checkpoint.config, artifact, checkpoint.source, loader);
    stages.push({ executor, kv: new KvStore(executor.kvOps, Number.MAX_SAFE_INTEGER) } as PipelineStage);
  }
  const { route, peers } = await inProcessRoute(stages.map((s) => s.executor), options.memoryBudgetBytes, { batching: options.batching, prefixBudgetBytes: options.prefixBudgetBytes });
  return {
    head,
    stages,
    route,
    vocabSize: checkpoint.config.vocabSize,
    devices: [...stages.map((s) => s.executor.loaded.device), head.device],
    async dispose() {
      for (const stage of stages) stage.kv.clear();
      // Each in-process peer owns its executor (and disposes it).
      for (const peer of peers) await peer.dispose();
      await head.dispose();
    },
  };
}
