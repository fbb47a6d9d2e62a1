/**
 * Teacher forcing over a long context: feed a fixed token sequence through a pooled
 * pipeline and the unpooled reference (steps of `chunk` tokens, then single tokens, with one
 * rollback on the way) and report the largest logit difference at any position. The logits
 * of every position are taken from each pipeline's last hidden states through the reference
 * head, so the comparison covers the layers (and their KV) only. Shared by the in-process
 * test and the WebGPU child process (test/kv/pool-webgpu-child.ts).
 */
import type { Activations } from '../../src/core/runtime/shard-executor.ts';
import type { LoadedPipeline } from '../../src/node/local-model.ts';
import { maxAbsDiff } from '../engine/harness.ts';

export interface ForcingResult {
  readonly positions: number;
  readonly steps: number;
  readonly maxDiff: number;
  /** Where the largest difference was seen. */
  readonly worstPosition: number;
}

export interface ForcingPlan {
  readonly sessionId: string;
  /** Tokens per step until `singleFrom`, then one per step. */
  readonly chunk: number;
  readonly singleFrom: number;
  /** At this position the step restarts `rollbackBy` positions earlier (the KV is truncated). */
  readonly rollbackAt: number;
  readonly rollbackBy: number;
}

/** Deterministic reference tokens in [1, vocab). */
export function referenceTokens(count: number, vocab: number, seed = 7): number[] {
  let x = seed;
  return Array.from({ length: count }, () => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return 1 + (x % (vocab - 1));
  });
}

async function stepHidden(p: LoadedPipeline, embedder: LoadedPipeline, sessionId: string, ids: number[], position: number): Promise<Activations> {
  let hidden: Activations = await embedder.head.embed(ids);
  for (const stage of p.stages) {
    const kv = stage.kv.acquire(sessionId, stage.executor.range);
    hidden = await stage.executor.run({ sessionId, startPosition: position, hidden }, kv);
  }
  return hidden;
}

function position(a: Activations, i: number): Activations {
  return { ...a, data: a.data.subarray(i * a.hiddenSize, (i + 1) * a.hiddenSize) as Float32Array, tokens: 1 };
}

export async function teacherForce(pooled: LoadedPipeline, reference: LoadedPipeline, tokens: readonly number[], plan: ForcingPlan): Promise<ForcingResult> {
  let maxDiff = 0;
  let worstPosition = 0;
  let steps = 0;
  let rolledBack = false;
  for (let p = 0; p < tokens.length; ) {
    if (!rolledBack && p >= plan.rollbackAt) {
      rolledBack = true;
      p -= plan.rollbackBy; // a frame whose start is below the KV length: truncate, then run
    }
    const n = p < plan.singleFrom ? Math.min(plan.chunk, plan.singleFrom - p) : 1;
    const ids = tokens.slice(p, p + n);
    const a = await stepHidden(pooled, reference, plan.sessionId, ids, p);
    const b = await stepHidden(reference, reference, plan.sessionId, ids, p);
    for (let i = 0; i < n; i++) {
      const d = maxAbsDiff(await reference.head.logits(position(a, i)), await reference.head.logits(position(b, i)));
      // A NaN logit makes the worst difference NaN (and the caller's bound fail), never skipped.
      if (Number.isNaN(d) ? !Number.isNaN(maxDiff) : d > maxDiff) (maxDiff = d), (worstPosition = p + i);
    }
    steps++;
    p += n;
  }
  return { positions: tokens.length, steps, maxDiff, worstPosition };
}
