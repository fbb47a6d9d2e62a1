/**
 * The requests every bench configuration runs, whatever engine serves them (meshnet in
 * bench/measure.ts, llama.cpp in bench/llama-cpp/measure-llama.ts), and how their token
 * times become figures. No engine imports here: a llama.cpp child process must not load
 * onnxruntime, or its peak RSS would not be llama.cpp's own.
 *
 *   warm-up: 8-token prompt, 2 tokens (first-run costs out of the figures)
 *   short:   32-token prompt, `decodeTokens` tokens → time to first token, decode tokens/s
 *   long:    `longPrompt`-token prompt, 1 token   → time to first token
 * short and long run `repeats` times each. Decode tokens/s is 1000 ÷ the median interval
 * between tokens, TTFT the fastest, each the best repeat; the mean rate and the fastest
 * interval are kept too, with the load average seen.
 */
import os from 'node:os';

export interface RequestTiming {
  readonly promptTokens: number;
  readonly ttftMs: number;
  /** ms since the request started, per generated token. */
  readonly tokenTimesMs: readonly number[];
  readonly tokenIds: readonly number[];
}

/** What the request driver needs of a spec. */
export interface RequestSpec {
  readonly repeats: number;
  readonly decodeTokens: number;
  readonly longPrompt: number;
}

/** Runs one greedy request from an empty cache; resolves with the times of its tokens. */
export type Generate = (promptIds: number[], tokens: number) => Promise<RequestTiming>;

/** A deterministic prompt of `length` ids in [3, vocab) (no special tokens). */
export function promptOf(length: number, vocab: number, seed: number): number[] {
  let state = seed >>> 0 || 1;
  return Array.from({ length }, () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return 3 + (state % (vocab - 3));
  });
}

/** Times one request: `run` calls `onToken` once per generated token, in order. */
export async function timed(promptIds: number[], run: (onToken: (id: number) => void) => Promise<void>): Promise<RequestTiming> {
  const times: number[] = [];
  const ids: number[] = [];
  const started = performance.now();
  await run((id) => {
    times.push(performance.now() - started);
    ids.push(id);
  });
  return { promptTokens: promptIds.length, ttftMs: times[0], tokenTimesMs: times, tokenIds: ids };
}

export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

/** Peak resident memory of this process, bytes. */
export const ownPeakRss = () => process.resourceUsage().maxRSS * 1024;

export async function measureRequests(generate: Generate, vocab: number, spec: RequestSpec) {
  const load0 = os.loadavg()[0];
  await generate(promptOf(8, vocab, 1), 2);
  const cpu = process.cpuUsage();
  const wall = performance.now();
  let short: RequestTiming | undefined;
  let long: RequestTiming | undefined;
  let decodeTokensPerSecond = 0;
  let meanDecodeTokensPerSecond = 0;
  let fastestTokenMs = Infinity;
  for (let r = 0; r < spec.repeats; r++) {
    const run = await generate(promptOf(32, vocab, 2), spec.decodeTokens);
    const t = run.tokenTimesMs;
    const intervals = t.slice(1).map((x, i) => x - t[i]);
    const rate = 1000 / median(intervals);
    if (rate > decodeTokensPerSecond) (decodeTokensPerSecond = rate), (short = run);
    meanDecodeTokensPerSecond = Math.max(meanDecodeTokensPerSecond, ((t.length - 1) * 1000) / (t[t.length - 1] - t[0]));
    fastestTokenMs = Math.min(fastestTokenMs, ...intervals);
    const longRun = await generate(promptOf(spec.longPrompt, vocab, 3), 1);
    if (!long || longRun.ttftMs < long.ttftMs) long = longRun;
    if (run.ttftMs < short!.ttftMs) short = { ...short!, ttftMs: run.ttftMs };
  }
  const used = process.cpuUsage(cpu);
  const cpuPerWall = (used.user + used.system) / 1000 / (performance.now() - wall);
  const loadAverage: [number, number] = [load0, os.loadavg()[0]];
  return { short: short!, long: long!, decodeTokensPerSecond, meanDecodeTokensPerSecond, fastestTokenMs, loadAverage, cpuPerWall };
}
