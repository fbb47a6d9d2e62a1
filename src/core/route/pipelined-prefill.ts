/**
 * Pipelined prefill: a long block is cut into chunks that flow through the hops one after
 * another, so hop 2 runs chunk 1 while hop 1 runs chunk 2. Each hop still sees its chunks in
 * position order, one at a time (its KV grows chunk by chunk, exactly as one prefill would
 * build it), so history and repair work per chunk, unchanged: a hop that fails mid-way is
 * rebuilt or replaced while the other hops carry on with the chunks they hold.
 */
import type { Activations } from '../runtime/shard-executor.ts';

/** Smallest chunk worth a frame of its own (below it a frame's fixed costs dominate). */
export const MIN_PREFILL_CHUNK = 64;

/**
 * Tokens per chunk for a block of `tokens` positions over `hops` hops: `setting` when given
 * (0: never cut), else about 4 chunks per hop, at least MIN_PREFILL_CHUNK tokens each. With m
 * equal chunks over H equal hops the block takes (m + H − 1) / (m·H) of the sequential time:
 * 4 per hop gives 0.56 over 2 hops and 0.5 over 3 (before per-frame costs). Returns `tokens`
 * (no cut) for one hop or a block too short to cut.
 */
export function prefillChunkSize(tokens: number, hops: number, setting?: number): number {
  if (hops < 2 || setting === 0) return tokens;
  if (setting !== undefined) return Math.min(tokens, setting);
  if (tokens < 2 * MIN_PREFILL_CHUNK) return tokens;
  return Math.max(MIN_PREFILL_CHUNK, Math.ceil(tokens / (4 * hops)));
}

/** Positions `[start, start + a.tokens)` of a block. */
export interface Chunk {
  readonly start: number;
  readonly activations: Activations;
}

/** `a` cut into chunks of `size` positions (the last one may be shorter), as views. */
export function cutChunks(a: Activations, start: number, size: number): Chunk[] {
  const chunks: Chunk[] = [];
  for (let offset = 0; offset < a.tokens; offset += size) {
    const tokens = Math.min(size, a.tokens - offset);
    const data = a.data.subarray(offset * a.hiddenSize, (offset + tokens) * a.hiddenSize) as Float32Array | Uint16Array;
    chunks.push({ start: start + offset, activations: { dtype: a.dtype, data, tokens, hiddenSize: a.hiddenSize } });
  }
  return chunks;
}

/**
 * Runs every chunk through `hops` hops: chunk j enters hop h once hop h − 1 answered it and
 * hop h answered chunk j − 1. `run(hop, chunk, signal)` sends one chunk to one hop (repairing
 * it as needed) and resolves with that hop's output. The first failure aborts the signal given
 * to every other run (no chunk is sent after it); once every run has settled, it rejects with
 * that failure (or `signal`'s reason when the caller aborted). Resolves with the last hop's
 * output of the last chunk.
 */
export async function runPipelined(
  chunks: readonly Chunk[],
  hops: number,
  run: (hop: number, chunk: Chunk, signal: AbortSignal) => Promise<Activations>,
  signal: AbortSignal,
): Promise<Activations> {
  const inner = new AbortController();
  const onAbort = () => inner.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  let failed: { error: unknown } | undefined;
  const fail = (error: unknown) => {
    failed ??= { error };
    if (!inner.signal.aborted) inner.abort(error);
  };
  const runs: Promise<Activations>[] = [];
  let inputs: Promise<Activations>[] = chunks.map((c) => Promise.resolve(c.activations));
  try {
    for (let hop = 0; hop < hops; hop++) {
      let previous: Promise<unknown> = Promise.resolve();
      inputs = inputs.map((input, j) => {
        const out = Promise.all([input, previous]).then(([activations]) => {
          inner.signal.throwIfAborted();
          return run(hop, { start: chunks[j].start, activations }, inner.signal);
        });
        out.catch(fail);
        previous = out;
        runs.push(out);
        return out;
      });
    }
    await Promise.allSettled(runs);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  if (signal.aborted) throw signal.reason;
  if (failed) throw failed.error;
  return inputs[inputs.length - 1];
}
