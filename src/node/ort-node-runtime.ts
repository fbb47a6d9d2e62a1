/**
 * onnxruntime in Node: the one module that owns onnxruntime-node (and onnxruntime-web for
 * `--device wasm`). Maps device names to providers and picks session options.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import * as ortNode from 'onnxruntime-node';
import { providersFor, type DeviceTable } from '../core/runtime/devices.ts';
import type { OrtModule } from '../core/runtime/ort-session.ts';
import type { OrtLoaderOptions } from '../core/runtime/ort-loader.ts';
import type { ActivationDtype } from '../core/model/shard-graph.ts';
import { WEIGHTS_FILE } from '../core/runtime/ort-session.ts';
import { cachedArtifactDirectory } from './artifact-cache.ts';

/** `auto` tries CUDA, then WebGPU (Dawn; software Vulkan works too), then the CPU. */
export const NODE_DEVICES: DeviceTable = {
  auto: ['cuda', 'webgpu', 'cpu'],
  cuda: ['cuda'],
  webgpu: ['webgpu'],
  cpu: ['cpu'],
  wasm: ['wasm'],
};

export interface NodeRuntimeOptions {
  readonly device: string;
  readonly dtype: ActivationDtype;
  /** Threads per session; in multi-process runs keep it small and spinning off. */
  readonly threads?: number;
  /**
   * Let idle onnxruntime threads spin between operators (default off). Spinning saves the
   * wake-up of every pool thread at every operator — a lot for decode on an otherwise idle
   * machine — but steals cores from other processes (peers, anything else running).
   */
  readonly spinning?: boolean;
}

async function webModule(): Promise<OrtModule> {
  const ort = await import('onnxruntime-web');
  ort.env.wasm.numThreads = 1; // wasm threads need workers with cross-origin isolation; Node tests run one.
  return ort as unknown as OrtModule;
}

/** Loader options for a device: which module, providers and session settings. */
export async function nodeLoaderOptions(options: NodeRuntimeOptions): Promise<OrtLoaderOptions> {
  let providers = providersFor(NODE_DEVICES, options.device);
  if (options.device === 'wasm') {
    // The same cached weights.bin, as bytes: onnxruntime-web takes external data from memory.
    return { ort: await webModule(), providers, weights: async (artifact) => new Uint8Array(await readFile(path.join(cachedArtifactDirectory(artifact), WEIGHTS_FILE))) };
  }
  // CUDA's GroupQueryAttention runs fp16/bf16 only: fp32 shards skip CUDA in `auto`.
  if (options.dtype === 'fp32' && options.device === 'auto') providers = providers.filter((p) => p !== 'cuda');
  ortNode.env.logLevel = 'error';
  return {
    ort: ortNode as unknown as OrtModule,
    providers,
    intraOpThreads: options.threads,
    kvOnGpu: true,
    // Weights from a file, not from memory: see PackedWeights (src/core/runtime/ort-session.ts).
    weightsFromFolder: true,
    weights: async (artifact) => ({ folder: cachedArtifactDirectory(artifact) }),
    extra: options.spinning ? {} : { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
  };
}
