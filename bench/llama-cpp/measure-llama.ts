/**
 * llama.cpp (through node-llama-cpp's prebuilt CPU binary) in a process of its own, as
 * bench/measure.ts runs meshnet: `node --import tsx bench/llama-cpp/measure-llama.ts '<JSON>'`
 * prints one JSON line on stdout. This file imports no onnxruntime and no meshnet engine
 * code, so the process's peak RSS is llama.cpp's (plus Node, tsx and node-llama-cpp).
 *
 * Two jobs:
 * - a MeasureSpec of kind 'llama-cpp' → a MeasureResult: the bench's requests
 *   (bench/requests.ts), greedy from token ids, each from an empty KV cache;
 * - a LlamaCheckSpec → LlamaCheckResult: greedy tokens after a prompt and the raw logits
 *   after each of its first positions (bench/llama-cpp/check.ts compares them with meshnet's).
 *
 * Settings (measuring): llama.cpp's own defaults — F16 KV cache, mmap'd weights, flash
 * attention on (node-llama-cpp's "auto" on CPU) — except the thread count, pinned
 * (`threads` ideal = min) to the meshnet rows', and the context, sized to the longest request.
 */
import type { MeasureResult, MeasureSpec } from '../measure.ts';
import { measureRequests, ownPeakRss, timed, type Generate } from '../requests.ts';
import { cpuFeatures } from './cpu-variant.ts';
import { type LlamaContextSequence, loadLlamaCpp } from './node-llama-cpp.ts';

export interface LlamaCheckSpec {
  readonly kind: 'llama-cpp-check';
  readonly gguf: string;
  readonly moduleDir: string;
  readonly threads: number;
  readonly contextSize: number;
  readonly vocabSize: number;
  readonly promptIds: readonly number[];
  readonly tokens: number;
  /** Logits after prompt positions 0 … logitPositions − 1. */
  readonly logitPositions: number;
  /**
   * fp32 attention: KV cache F32 and flash attention off. llama.cpp's CPU defaults (F16 KV,
   * flash attention on) round K and V to f16, ~3e-4 of the logits' scale away from fp32.
   */
  readonly exact: boolean;
}

export interface LlamaCheckResult {
  readonly tokenIds: number[];
  readonly logits: number[][];
  readonly buildType: string;
  readonly threads: number;
}

/** Greedy tokens after `promptIds` on a sequence whose history the caller cleared. */
async function greedy(sequence: LlamaContextSequence, promptIds: number[], tokens: number, onToken: (id: number) => void) {
  let count = 0;
  // yieldEogToken: an end-of-sequence token is yielded and generation goes on, as the bench's meshnet runs ignore EOS.
  for await (const token of sequence.evaluate(promptIds, { temperature: 0, yieldEogToken: true })) {
    onToken(token);
    if (++count >= tokens) break;
  }
}

async function measure(spec: MeasureSpec & { kind: 'llama-cpp' }): Promise<MeasureResult> {
  const loadStart = performance.now();
  const llama = await loadLlamaCpp(spec.moduleDir, spec.threads);
  const model = await llama.loadModel({ modelPath: spec.gguf, gpuLayers: 0 });
  const context = await model.createContext({ contextSize: spec.contextSize, threads: { ideal: spec.threads, min: spec.threads }, batchSize: Math.min(spec.contextSize, 512) });
  const sequence = context.getSequence();
  const loadMs = performance.now() - loadStart;
  try {
    const generate: Generate = async (promptIds, tokens) => {
      await sequence.clearHistory(); // an empty KV cache, outside the timed request (meshnet's runs open a new session)
      return timed(promptIds, (onToken) => greedy(sequence, promptIds, tokens, onToken));
    };
    const runs = await measureRequests(generate, spec.vocabSize, spec);
    return {
      spec,
      loadMs,
      ...runs,
      peakRssBytes: ownPeakRss(),
      peers: [],
      hops: [],
      devices: [`llama.cpp ${llama.buildType} CPU (${cpuFeatures(llama.systemInfo).join(' ')}), ${context.currentThreads} threads, context ${context.contextSize}`],
      weightBytesPerToken: spec.weightBytesPerToken,
    };
  } finally {
    await context.dispose();
    await model.dispose();
    await llama.dispose();
  }
}

async function check(spec: LlamaCheckSpec): Promise<LlamaCheckResult> {
  const llama = await loadLlamaCpp(spec.moduleDir, spec.threads);
  const model = await llama.loadModel({ modelPath: spec.gguf, gpuLayers: 0 });
  const kv = spec.exact ? ({ experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32', flashAttention: false } as const) : {};
  const context = await model.createContext({ contextSize: spec.contextSize, threads: { ideal: spec.threads, min: spec.threads }, batchSize: Math.min(spec.contextSize, 512), ...kv });
  const sequence = context.getSequence();
  try {
    const tokenIds: number[] = [];
    await sequence.clearHistory();
    await greedy(sequence, [...spec.promptIds], spec.tokens, (id) => tokenIds.push(id));
    await sequence.clearHistory();
    const input = spec.promptIds.map((id, i) => (i < spec.logitPositions ? ([id, { generateNext: { logits: true } }] as [number, { generateNext: { logits: boolean } }]) : id));
    const outputs = await sequence.controlledEvaluate(input);
    const logits = outputs.slice(0, spec.logitPositions).map((output, i) => {
      const map = output?.next.logits;
      if (!map) throw new Error(`node-llama-cpp returned no logits after prompt position ${i}`);
      const dense = new Array<number>(spec.vocabSize).fill(Number.NaN);
      for (const [token, logit] of map) dense[token] = logit;
      return dense;
    });
    return { tokenIds, logits, buildType: llama.buildType, threads: context.currentThreads };
  } finally {
    await context.dispose();
    await model.dispose();
    await llama.dispose();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const spec = JSON.parse(process.argv[2]) as (MeasureSpec & { kind: 'llama-cpp' }) | LlamaCheckSpec;
  const result = spec.kind === 'llama-cpp-check' ? await check(spec) : await measure(spec);
  // Exit once the line is flushed: a large result written to a pipe would be cut by an immediate exit.
  process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
}
