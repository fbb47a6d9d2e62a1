/**
 * The part of node-llama-cpp's API the bench uses, typed here because the package is not a
 * project dependency (bench/llama-cpp/install.ts puts it in a folder of its own), and the
 * one function that loads it from there: the prebuilt CPU binary (`gpu: false`,
 * `build: 'never'`: never a local build, never a GPU).
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export interface LlamaContextSequence {
  /** Evaluates `tokens`, then yields each generated token (greedy at temperature 0) until the caller stops. */
  evaluate(tokens: number[], options: { temperature: number; yieldEogToken?: boolean }): AsyncGenerator<number, void, void>;
  /** Evaluates `input`; an item `[token, { generateNext: { logits: true } }]` returns the raw next-token logits after it. */
  controlledEvaluate(input: (number | [number, { generateNext: { logits?: boolean; token?: boolean } }])[]): Promise<({ next: { token?: number | null; logits?: Map<number, number> } } | undefined)[]>;
  clearHistory(): Promise<void>;
}

export interface LlamaContext {
  readonly contextSize: number;
  readonly currentThreads: number;
  getSequence(): LlamaContextSequence;
  dispose(): Promise<void>;
}

export interface LlamaModel {
  createContext(options: {
    contextSize: number;
    threads: { ideal: number; min: number };
    batchSize?: number;
    flashAttention?: boolean;
    /** Experimental in 3.22: the KV cache element type ('F16' by default). */
    experimentalKvCacheKeyType?: 'F32' | 'F16';
    experimentalKvCacheValueType?: 'F32' | 'F16';
  }): Promise<LlamaContext>;
  readonly flashAttentionSupported: boolean;
  dispose(): Promise<void>;
}

export interface Llama {
  readonly buildType: string;
  readonly gpu: string | false;
  readonly cpuMathCores: number;
  /** llama.cpp's system info line (`CPU : SSE3 = 1 | AVX2 = 1 | … | REPACK = 1 |`): the features of the CPU backend it loaded. */
  readonly systemInfo: string;
  loadModel(options: { modelPath: string; gpuLayers: number; useMmap?: boolean }): Promise<LlamaModel>;
  dispose(): Promise<void>;
}

interface NodeLlamaCppModule {
  getLlama(options: { gpu: false; build: 'never'; logLevel: string; maxThreads: number; progressLogs?: boolean }): Promise<Llama>;
}

/** Loads node-llama-cpp from the folder it was installed in and starts its CPU backend with at most `threads` threads. */
export async function loadLlamaCpp(moduleDir: string, threads: number): Promise<Llama> {
  const entry = path.join(moduleDir, 'node_modules', 'node-llama-cpp', 'dist', 'index.js');
  const module = (await import(pathToFileURL(entry).href)) as NodeLlamaCppModule;
  return module.getLlama({ gpu: false, build: 'never', logLevel: 'error', maxThreads: threads, progressLogs: false });
}
