/**
 * Complete-model mode in one process: the head's embedding and LM head around a chain of
 * in-process shard executors, each with its peer's KvStore. Prefill sends every prompt
 * position through each stage; decode sends one position per step.
 */
import type { HeadRunner } from '../runtime/ort-head-runner.ts';
import type { KvStore } from '../runtime/kv-store.ts';
import type { Activations, ShardExecutor } from '../runtime/shard-executor.ts';
import { Sampler, StopChecker, type FinishReason, type SamplingParams, type TokenLogprob } from '../sampling/index.ts';

export interface PipelineStage<T = unknown> {
  readonly executor: ShardExecutor<T>;
  readonly kv: KvStore<T>;
}

export interface LocalPipeline {
  readonly head: HeadRunner;
  readonly stages: readonly PipelineStage[];
  readonly vocabSize: number;
}

export interface GeneratedToken {
  readonly tokenId: number;
  readonly logprob: number;
  readonly topLogprobs: readonly TokenLogprob[];
  /** Set on the last event. A 'stop' event's token is the stop token itself (not to be shown). */
  readonly finishReason?: FinishReason;
}

/** Run `hidden` (starting at `position`) through every stage. */
async function forward(pipeline: LocalPipeline, sessionId: string, hidden: Activations, position: number, signal?: AbortSignal): Promise<Activations> {
  let current = hidden;
  for (const stage of pipeline.stages) {
    const kv = stage.kv.acquire(sessionId, stage.executor.range);
    current = await stage.executor.run({ sessionId, startPosition: position, hidden: current }, kv, signal);
    stage.kv.enforceBudget(kv);
  }
  return current;
}

/**
 * Generate from `promptIds`. Yields one event per sampled token; the session's KV is
 * released on every stage when the generator finishes, fails or is abandoned.
 */
export async function* generateLocal(
  pipeline: LocalPipeline,
  promptIds: readonly number[],
  params: SamplingParams,
  sessionId: string,
  signal?: AbortSignal,
): AsyncGenerator<GeneratedToken> {
  if (promptIds.length === 0) throw new RangeError('the prompt has no tokens');
  const sampler = new Sampler(params, pipeline.vocabSize);
  const stop = new StopChecker(params);
  const generated: number[] = [];
  try {
    let hidden = await forward(pipeline, sessionId, await pipeline.head.embed(promptIds), 0, signal);
    let position = promptIds.length;
    for (;;) {
      signal?.throwIfAborted();
      const token = sampler.sample(await pipeline.head.logits(hidden), { prompt: promptIds, generated });
      generated.push(token.tokenId);
      const finishReason = stop.check(token.tokenId, generated.length);
      yield { ...token, finishReason };
      if (finishReason) return;
      hidden = await forward(pipeline, sessionId, await pipeline.head.embed([token.tokenId]), position, signal);
      position += 1;
    }
  } finally {
    for (const stage of pipeline.stages) stage.kv.release(sessionId);
  }
}
