/**
 * Complete-model mode in one process: the head's embedding and LM head around a chain of
 * in-process shards. Generation runs the same RouteSession as a mesh, over a StaticRoute of
 * in-process peers; `stages` (each executor with a KvStore of its own) stay available for
 * step-by-step numerical checks.
 */
import type { TextTokenizer } from '../model/tokenizer.ts';
import type { HeadRunner } from '../runtime/ort-head-runner.ts';
import type { KvStore } from '../runtime/kv-store.ts';
import type { ShardExecutor } from '../runtime/shard-executor.ts';
import type { SamplingParams, TokenLogprob } from '../sampling/index.ts';
import type { SpeculateMode } from '../speculation/drafter.ts';
import type { Drafters } from '../speculation/drafters.ts';
import { RouteSession, type RouteSessionRequest } from './route-session.ts';
import type { RouteProvider } from '../mesh/route-provider.ts';

export interface PipelineStage<T = unknown> {
  readonly executor: ShardExecutor<T>;
  readonly kv: KvStore<T>;
}

export interface LocalPipeline {
  readonly head: HeadRunner;
  readonly stages: readonly PipelineStage[];
  readonly vocabSize: number;
  /** In-process hops over the same executors, for Route Sessions. */
  readonly route: RouteProvider;
}

export interface GeneratedToken {
  readonly tokenId: number;
  readonly logprob: number;
  readonly topLogprobs: readonly TokenLogprob[];
}

/** A Route Session over the pipeline's in-process route. */
export function openLocalSession(
  pipeline: LocalPipeline,
  request: RouteSessionRequest,
  signal?: AbortSignal,
  tokenizer?: TextTokenizer,
  drafters?: Drafters,
): RouteSession {
  // In-process shards run one after another on this thread: a pipelined prefill would gain nothing.
  return new RouteSession({ head: pipeline.head, route: pipeline.route, vocabSize: pipeline.vocabSize, tokenizer, drafters, policy: { prefillChunk: 0 } }, request, signal);
}

/** The generated tokens (a stop token is not included), for callers that need no text. */
export async function* generateLocal(
  pipeline: LocalPipeline,
  promptIds: readonly number[],
  params: SamplingParams,
  sessionId: string,
  signal?: AbortSignal,
  speculate?: SpeculateMode,
): AsyncGenerator<GeneratedToken> {
  for await (const event of openLocalSession(pipeline, { sessionId, promptIds, params, speculate }, signal)) {
    if (event.type === 'token') yield { tokenId: event.tokenId, logprob: event.logprob, topLogprobs: event.topLogprobs };
  }
}
