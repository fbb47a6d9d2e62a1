/**
 * onnxruntime memory settings `bench/peer-memory.ts` compares: each one is session options
 * (top level, e.g. `enableCpuMemArena`) and session config entries (`session.*` keys, given
 * through `extra.session`) laid over what a Node peer uses today.
 */
import type { OrtLoaderOptions } from '../src/core/runtime/ort-loader.ts';
import type { OrtModule } from '../src/core/runtime/ort-session.ts';

export interface MemoryVariant {
  /** SessionOptions fields (enableCpuMemArena, enableMemPattern, …). */
  readonly options?: Record<string, unknown>;
  /** Session config entries under `session.` (values are strings, as onnxruntime wants). */
  readonly session?: Record<string, string>;
}

export const PEER_MEMORY_VARIANTS: Record<string, MemoryVariant> = {
  default: {},
  'no-prepack': { session: { disable_prepacking: '1' } },
  'no-arena': { options: { enableCpuMemArena: false } },
  'no-pattern': { options: { enableMemPattern: false } },
  'no-arena-no-pattern': { options: { enableCpuMemArena: false, enableMemPattern: false } },
  'no-prepack-no-arena': { options: { enableCpuMemArena: false }, session: { disable_prepacking: '1' } },
  'device-alloc-init': { session: { use_device_allocator_for_initializers: '1' } },
  'device-alloc-init-no-arena': { options: { enableCpuMemArena: false }, session: { use_device_allocator_for_initializers: '1' } },
  'env-allocators': { session: { use_env_allocators: '1' } },
};

/** `loader` with `variant` laid over every session it creates. */
export function withMemoryVariant(loader: OrtLoaderOptions, variant: MemoryVariant): OrtLoaderOptions {
  const ort = loader.ort;
  const wrapped: OrtModule = {
    Tensor: ort.Tensor,
    InferenceSession: {
      create: (graph, options = {}) => {
        const extra = (options.extra ?? {}) as Record<string, unknown>;
        const session = { ...((extra.session ?? {}) as Record<string, unknown>), ...variant.session };
        return ort.InferenceSession.create(graph, { ...options, ...variant.options, extra: { ...extra, session } });
      },
    },
  };
  return { ...loader, ort: wrapped };
}
