/**
 * Creating onnxruntime sessions with an execution-provider fallback chain. The `ort` module
 * (onnxruntime-node or onnxruntime-web, which share onnxruntime-common's API) is injected by
 * the runtime, so this file imports only types.
 */
import type * as Ort from 'onnxruntime-common';
import { WEIGHTS_FILE } from '../model/shard-artifact.ts';

/** The parts of an onnxruntime module meshnet uses. */
export interface OrtModule {
  readonly InferenceSession: { create(model: Uint8Array, options?: Ort.InferenceSession.SessionOptions): Promise<Ort.InferenceSession> };
  readonly Tensor: typeof Ort.Tensor;
}


export class DeviceUnavailableError extends Error {
  override readonly name = 'DeviceUnavailableError';
  constructor(readonly tried: readonly { provider: string; error: string }[]) {
    super(`no execution provider could run the graph: ${tried.map((t) => `${t.provider} (${t.error})`).join('; ')}`);
  }
}

export interface OrtSessionOptions {
  /** Providers to try in order; the first that creates a session wins. */
  readonly providers: readonly string[];
  /** Output names to keep on the device (KV on WebGPU), keyed to 'gpu-buffer'. */
  readonly gpuOutputs?: readonly string[];
  readonly intraOpThreads?: number;
  /** Extra session options per provider (e.g. turning thread spinning off). */
  readonly extra?: Record<string, unknown>;
}

/**
 * A part's packed weights: in memory, or the folder holding them as `WEIGHTS_FILE`.
 * Prefer the folder where there is a file system (Node): onnxruntime then reads each
 * initializer from the file itself. From memory (`externalData`), onnxruntime-node 1.30
 * makes a transient copy per initializer; glibc keeps those freed chunks resident, so the
 * process grew by about 1.7× the weights instead of about 1× (test/memory).
 */
export type PackedWeights = Uint8Array | { readonly folder: string };

/**
 * onnxruntime's config key `session.model_external_initializers_file_folder_path`: where a
 * graph loaded from bytes finds its external data files. `extra` nests keys at the dots.
 */
const EXTERNAL_DATA_FOLDER_KEY = 'model_external_initializers_file_folder_path';

function withExternalDataFolder(extra: Record<string, unknown> | undefined, folder: string): Record<string, unknown> {
  const session = (extra?.session ?? {}) as Record<string, unknown>;
  return { ...extra, session: { ...session, [EXTERNAL_DATA_FOLDER_KEY]: folder } };
}

export interface CreatedSession {
  readonly session: Ort.InferenceSession;
  readonly provider: string;
}

/**
 * Create a session from graph bytes and packed weights, trying each provider in turn.
 * (onnxruntime does not fall back by itself: a missing CUDA makes creation throw.)
 */
export async function createOrtSession(
  ort: OrtModule,
  graph: Uint8Array,
  weights: PackedWeights,
  options: OrtSessionOptions,
): Promise<CreatedSession> {
  const tried: { provider: string; error: string }[] = [];
  const inMemory = weights instanceof Uint8Array;
  for (const provider of options.providers) {
    const sessionOptions: Ort.InferenceSession.SessionOptions = {
      executionProviders: [provider],
      graphOptimizationLevel: 'all',
      externalData: inMemory && weights.byteLength > 0 ? [{ path: WEIGHTS_FILE, data: weights }] : undefined,
      extra: inMemory ? options.extra : withExternalDataFolder(options.extra, weights.folder),
      logSeverityLevel: 3,
    };
    if (options.intraOpThreads !== undefined) sessionOptions.intraOpNumThreads = options.intraOpThreads;
    if (options.gpuOutputs && options.gpuOutputs.length > 0 && provider === 'webgpu') {
      sessionOptions.preferredOutputLocation = Object.fromEntries(options.gpuOutputs.map((n) => [n, 'gpu-buffer' as const]));
    }
    try {
      return { session: await ort.InferenceSession.create(graph, sessionOptions), provider };
    } catch (error) {
      tried.push({ provider, error: error instanceof Error ? error.message.split('\n')[0] : String(error) });
    }
  }
  throw new DeviceUnavailableError(tried);
}
