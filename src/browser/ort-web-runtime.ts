/**
 * onnxruntime-web for the browser peer: the one module that owns it. `onnxruntime-web/webgpu`
 * is the native C++ WebGPU provider (the default import's JS provider gives wrong results
 * for attention with past/present); wasm is the fallback. Its files are served by the head
 * itself (`wasmPaths`), never from a CDN.
 */
import * as ort from 'onnxruntime-web/webgpu';
import { providersFor, type DeviceTable } from '../core/runtime/devices.ts';
import type { OrtLoaderOptions } from '../core/runtime/ort-loader.ts';
import type { OrtModule } from '../core/runtime/ort-session.ts';
import { RunQueue } from '../core/runtime/run-queue.ts';

/** The tab's one queue: its executors never call onnxruntime-web concurrently. */
const TAB_RUN_QUEUE = new RunQueue();

export const BROWSER_DEVICES: DeviceTable = {
  auto: ['webgpu', 'wasm'],
  webgpu: ['webgpu'],
  wasm: ['wasm'],
};

export interface BrowserRuntimeOptions {
  readonly device: string;
  /** URL prefix where the head serves onnxruntime-web's dist files. */
  readonly wasmPaths?: string;
  /** wasm threads; more than one needs cross-origin isolation (COOP/COEP headers). */
  readonly threads?: number;
}

export function browserLoaderOptions(options: BrowserRuntimeOptions): OrtLoaderOptions {
  if (options.wasmPaths) ort.env.wasm.wasmPaths = options.wasmPaths;
  ort.env.wasm.numThreads = options.threads ?? 1;
  ort.env.logLevel = 'error';
  return {
    ort: ort as unknown as OrtModule,
    providers: providersFor(BROWSER_DEVICES, options.device),
    kvOnGpu: true, // present KV stays in GPU buffers on WebGPU and is fed back as past
    runQueue: TAB_RUN_QUEUE,
  };
}
