/**
 * onnxruntime memory settings `bench/peer-memory.ts` compares: each one is session options
 * (top level, e.g. `enableCpuMemArena`) and session config entries (`session.*` keys, given
 * through `extra.session`) laid over what a Node peer uses today.
 */
import { readFileSync } from 'node:fs';
import type { OrtLoaderOptions } from '../src/core/runtime/ort-loader.ts';
import type * as Ort from 'onnxruntime-common';
import { SHARD_INPUT_HIDDEN } from '../src/core/model/shard-graph.ts';
import { withoutGraphOutputs } from './onnx-outputs.ts';
import type { OrtModule } from '../src/core/runtime/ort-session.ts';

export interface MemoryVariant {
  /** SessionOptions fields (enableCpuMemArena, enableMemPattern, …). */
  readonly options?: Record<string, unknown>;
  /** Session config entries under `session.` (values are strings, as onnxruntime wants). */
  readonly session?: Record<string, string>;
  /**
   * Run options laid over every run (or, `prefillOnly`, over runs of more than one position):
   * e.g. `memory.enable_memory_arena_shrinkage` = 'cpu:0' through `extra`.
   */
  readonly run?: { readonly extra: Record<string, unknown>; readonly prefillOnly?: boolean };
  /** Graph outputs `present.*` dropped before the session is created (see withoutGraphOutputs). */
  readonly noPresentOutputs?: boolean;
  /** The layers' attention (see AttentionKind): 'in-place' fetches no present KV at all. */
  readonly attention?: 'in-place';
  /**
   * 'save': the session also writes onnxruntime's optimized graph with its pre-packed weights
   * into PEER_MEMORY_PREPACKED_DIR (`session.save_external_prepacked_constant_initializers`);
   * 'load': the session is created from that saved graph instead of the part's own.
   */
  readonly prepackedFile?: 'save' | 'load';
  /**
   * Environment variables of the child process (glibc's malloc reads MALLOC_* only at start-up,
   * so a process cannot set them for itself; `meshnet peer` re-executes itself with PEER_MALLOC_ENV).
   */
  readonly env?: Record<string, string>;
}

/**
 * glibc malloc settings a Node peer starts with (see src/node/malloc-env.ts): one malloc arena
 * (onnxruntime's runs come from libuv's pool threads, each of which would get its own), and a
 * fixed mmap threshold, so a freed block of 64 KiB or more goes back to the system instead of
 * raising glibc's dynamic threshold until every later block stays in the heap.
 */
const GLIBC = { MALLOC_ARENA_MAX: '1', MALLOC_MMAP_THRESHOLD_: '65536' };

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
  // onnxruntime's run option: give the CPU arena's free regions back at the end of a run.
  'shrink-prefill': { run: { extra: { memory: { enable_memory_arena_shrinkage: 'cpu:0' } }, prefillOnly: true } },
  'shrink-every-run': { run: { extra: { memory: { enable_memory_arena_shrinkage: 'cpu:0' } } } },
  'no-present-outputs': { noPresentOutputs: true },
  'in-place': { attention: 'in-place' },
  'in-place-no-pattern': { attention: 'in-place', options: { enableMemPattern: false } },
  'in-place-no-arena': { attention: 'in-place', options: { enableCpuMemArena: false } },
  'in-place-no-arena-no-pattern': { attention: 'in-place', options: { enableCpuMemArena: false, enableMemPattern: false } },
  'in-place-shrink-prefill': { attention: 'in-place', run: { extra: { memory: { enable_memory_arena_shrinkage: 'cpu:0' } }, prefillOnly: true } },
  glibc: { env: GLIBC },
  'glibc-256k': { env: { ...GLIBC, MALLOC_MMAP_THRESHOLD_: '262144' } },
  'arena-max-1': { env: { MALLOC_ARENA_MAX: '1' } },
  'glibc-1m': { env: { ...GLIBC, MALLOC_MMAP_THRESHOLD_: '1048576' } },
  'glibc-4m': { env: { ...GLIBC, MALLOC_MMAP_THRESHOLD_: '4194304' } },
  // A fixed mmap threshold also fixes the trim threshold at its 128 KiB default: the heap's top is given back and faulted in again every run.
  'glibc-trim-8m': { env: { ...GLIBC, MALLOC_TRIM_THRESHOLD_: '8388608' } },
  'glibc-1m-trim-8m': { env: { ...GLIBC, MALLOC_MMAP_THRESHOLD_: '1048576', MALLOC_TRIM_THRESHOLD_: '8388608' } },
  'no-arena-glibc': { options: { enableCpuMemArena: false }, env: GLIBC },
  'in-place-glibc': { attention: 'in-place', env: GLIBC },
  'in-place-no-arena-glibc': { attention: 'in-place', options: { enableCpuMemArena: false }, env: GLIBC },
  'in-place-no-arena-no-pattern-glibc': { attention: 'in-place', options: { enableCpuMemArena: false, enableMemPattern: false }, env: GLIBC },
  'save-prepacked': { prepackedFile: 'save' },
  'load-prepacked': { prepackedFile: 'load' },
  'load-prepacked-no-pattern': { prepackedFile: 'load', options: { enableMemPattern: false } },
  'load-prepacked-unoptimized': { prepackedFile: 'load', options: { graphOptimizationLevel: 'disabled' } },
  'load-prepacked-basic': { prepackedFile: 'load', options: { graphOptimizationLevel: 'basic' } },
};

/** `loader` with `variant` laid over every session it creates. */
export function withMemoryVariant(loader: OrtLoaderOptions, variant: MemoryVariant): OrtLoaderOptions {
  const ort = loader.ort;
  const wrapped: OrtModule = {
    Tensor: ort.Tensor,
    InferenceSession: {
      create: (graph, options = {}) => {
        const extra = (options.extra ?? {}) as Record<string, unknown>;
        let session: Record<string, unknown> = { ...((extra.session ?? {}) as Record<string, unknown>), ...variant.session };
        let model = variant.noPresentOutputs ? withoutGraphOutputs(graph, (name) => name.startsWith('present.')) : graph;
        const dir = process.env.PEER_MEMORY_PREPACKED_DIR;
        if (variant.prepackedFile && !dir) throw new Error('set PEER_MEMORY_PREPACKED_DIR');
        if (variant.prepackedFile === 'save') {
          session = {
            ...session,
            optimized_model_filepath: `${dir}/model.onnx`,
            optimized_model_external_initializers_file_name: 'prepacked.bin',
            optimized_model_external_initializers_min_size_in_bytes: '1024',
            save_external_prepacked_constant_initializers: process.env.PEER_MEMORY_SAVE_PREPACKED ?? '1',
          };
        } else if (variant.prepackedFile === 'load') {
          model = new Uint8Array(readFileSync(`${dir}/model.onnx`));
          session = { ...session, model_external_initializers_file_folder_path: dir };
        }
        const created = ort.InferenceSession.create(model, { ...options, ...variant.options, extra: { ...extra, session } });
        return variant.run ? created.then((s) => withRunOptions(s, variant.run!)) : created;
      },
    },
  };
  return { ...loader, ort: wrapped };
}

/** `session` with `run` laid over the options of its runs (all, or those feeding more than one position). */
function withRunOptions(session: Ort.InferenceSession, run: NonNullable<MemoryVariant['run']>): Ort.InferenceSession {
  const options = { extra: run.extra } as Ort.InferenceSession.RunOptions;
  const several = (feeds: Ort.InferenceSession.FeedsType) => {
    const hidden = feeds[SHARD_INPUT_HIDDEN];
    return hidden !== undefined && hidden.size / hidden.dims.at(-1)! > 1;
  };
  return new Proxy(session, {
    get(target, key) {
      if (key === 'run') {
        return (feeds: Ort.InferenceSession.FeedsType, fetches: Ort.InferenceSession.FetchesType) =>
          !run.prefillOnly || several(feeds) ? target.run(feeds, fetches, options) : target.run(feeds, fetches);
      }
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
