/**
 * onnxruntime in Node: the one module that owns onnxruntime-node (and onnxruntime-web for
 * `--device wasm`). Maps device names to providers and picks session options.
 */
import * as ortNode from 'onnxruntime-node';
import { providersFor, type DeviceTable } from '../core/runtime/devices.ts';
import type { OrtModule } from '../core/runtime/ort-session.ts';
import type { OrtLoaderOptions } from '../core/runtime/ort-loader.ts';
import type { ActivationDtype } from '../core/model/activations.ts';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { WEIGHTS_FILE } from '../core/model/shard-artifact.ts';
import { cachedArtifactDirectory } from './artifact-cache.ts';
import { probeProvider } from './provider-probe.ts';

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

/** A provider `auto` does not try, and why (for the one start-up line each process prints). */
export interface SkippedProvider {
  readonly provider: string;
  readonly reason: string;
}

export interface NodeLoaderOptions extends OrtLoaderOptions {
  /** What `--device auto` left out before trying anything (empty for an explicit device). */
  readonly skipped: readonly SkippedProvider[];
}

const ORT_LOG_LEVELS = ['verbose', 'info', 'warning', 'error', 'fatal'] as const;

/**
 * onnxruntime's native log level: 'fatal' unless MESHNET_ORT_LOG_LEVEL says otherwise.
 * Every failure still reaches us as an exception with its message; at 'error', a provider
 * that cannot load (CUDA without its libraries) also prints a red native line per session.
 */
function ortLogLevel(): (typeof ORT_LOG_LEVELS)[number] {
  const wanted = process.env.MESHNET_ORT_LOG_LEVEL as (typeof ORT_LOG_LEVELS)[number] | undefined;
  return wanted && ORT_LOG_LEVELS.includes(wanted) ? wanted : 'fatal';
}

/**
 * The providers `auto` tries, in order, and those it skips: CUDA for fp32 activations (its
 * GroupQueryAttention runs fp16/bf16 only) or when it cannot load, WebGPU when it cannot
 * start — found out quietly by provider-probe.ts, so no native warning reaches the terminal.
 */
export async function autoProviders(dtype: ActivationDtype): Promise<{ providers: string[]; skipped: SkippedProvider[] }> {
  const [cuda, webgpu] = await Promise.all([dtype === 'fp32' ? undefined : probeProvider('cuda'), probeProvider('webgpu')]);
  const verdicts: Record<string, { ok: boolean; reason?: string }> = {
    cuda: cuda ?? { ok: false, reason: "its attention needs --dtype fp16" },
    webgpu,
    cpu: { ok: true },
  };
  const providers: string[] = [];
  const skipped: SkippedProvider[] = [];
  for (const provider of NODE_DEVICES.auto!) {
    const verdict = verdicts[provider]!;
    if (verdict.ok) providers.push(provider);
    else skipped.push({ provider, reason: verdict.reason ?? 'unavailable' });
  }
  return { providers, skipped };
}

/**
 * How a process's parts were placed, for its one start-up line: "cpu (cuda skipped: …;
 * webgpu skipped: …)" under `auto`, "cpu (--device cpu)" otherwise.
 */
export function describeProviders(device: string, provider: string, skipped: readonly SkippedProvider[]): string {
  if (device !== 'auto') return `${provider} (--device ${device})`;
  if (skipped.length === 0) return `${provider} (--device auto)`;
  return `${provider} (${skipped.map((s) => `${s.provider} skipped: ${s.reason}`).join('; ')})`;
}

/** Loader options for a device: which module, providers and session settings. */
export async function nodeLoaderOptions(options: NodeRuntimeOptions): Promise<NodeLoaderOptions> {
  let providers = providersFor(NODE_DEVICES, options.device);
  if (options.device === 'wasm') {
    // The same cached weights.bin, as bytes: onnxruntime-web takes external data from memory.
    const weights = async (artifact: Parameters<typeof cachedArtifactDirectory>[0]) => new Uint8Array(await readFile(path.join(cachedArtifactDirectory(artifact), WEIGHTS_FILE)));
    return { ort: await webModule(), providers, skipped: [], weights };
  }
  let skipped: SkippedProvider[] = [];
  if (options.device === 'auto') ({ providers, skipped } = await autoProviders(options.dtype));
  ortNode.env.logLevel = ortLogLevel();
  return {
    ort: ortNode as unknown as OrtModule,
    providers,
    skipped,
    intraOpThreads: options.threads,
    kvOnGpu: true,
    // Weights from a file, not from memory: see PackedWeights (src/core/runtime/ort-session.ts).
    weightsFromFolder: true,
    weights: async (artifact) => ({ folder: cachedArtifactDirectory(artifact) }),
    extra: options.spinning ? {} : { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
  };
}
