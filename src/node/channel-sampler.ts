/**
 * A sequence's sampler whose state lives in a worker, reached through a `SamplerChannel`: the
 * head's runner (head-worker.ts, picks sampled beside the LM head) or the sampler worker
 * (sampler-worker.ts, with the head on the main thread). With the head worker: a
 * decode step's row is sampled there (`WorkerHeadRunner.startBlocks` with a pick), so neither the
 * row (0.6 MB at a 151,936-token vocabulary) nor its argmax or exp() passes reach the event
 * loop, and the only message back is the token. A row that is already here (a speculative
 * step verifies its rows one by one) is sent as a copy, to the same Sampler: one RNG per
 * sequence, in call order, so a seed gives the tokens a Sampler on one thread gives. Plain
 * greedy over a row that is here is one stateless argmax, done here.
 */
import { isPlainGreedy, Sampler, type SampledToken, type SamplingParams, type SequenceSampler, type TokenHistory, type TokenMask, type VerifiedSample } from '../core/sampling/index.ts';
import type { DraftToken } from '../core/sampling/speculative.ts';
import { NO_HISTORY, type SamplerCall } from './sampler-host.ts';

/** What a head-worker sampler needs of its runner. */
export interface SamplerChannel {
  /** Samples a copy of `row` ([vocab]; the caller's stays its own) with the call in the worker. */
  sample(call: SamplerCall, row: Float32Array): Promise<VerifiedSample>;
  /** Frees the worker's Sampler `handle` (after the calls already sent). */
  release(handle: number): void;
}

export class ChannelSampler implements SequenceSampler {
  private opened = false;
  private disposed = false;
  private local: Sampler | undefined;
  private readonly plainGreedy: boolean;
  private readonly penalized: boolean;

  constructor(
    readonly channel: SamplerChannel,
    private readonly handle: number,
    private readonly params: SamplingParams,
    private readonly vocabSize: number,
  ) {
    this.plainGreedy = isPlainGreedy(params);
    this.penalized = params.repetitionPenalty !== 1 || params.presencePenalty !== 0 || params.frequencyPenalty !== 0;
  }

  /** The call that names this sampler in the worker (opening it with the first). Throws once disposed. */
  call(history: TokenHistory, mask: TokenMask | undefined, draft?: DraftToken): SamplerCall {
    if (this.disposed) throw new Error('the sampler is disposed');
    const open = this.opened ? undefined : { params: this.params, vocabSize: this.vocabSize };
    this.opened = true;
    return {
      handle: this.handle,
      open,
      history: this.penalized ? { prompt: history.prompt, generated: history.generated } : NO_HISTORY,
      draft,
      mask: mask?.slice(), // the mask's own bytes (a view would clone its whole buffer)
    };
  }

  sample(logits: Float32Array, history: TokenHistory, mask?: TokenMask): SampledToken | Promise<SampledToken> {
    if (this.plainGreedy && !mask) return (this.local ??= new Sampler(this.params, this.vocabSize)).sample(logits, history);
    return this.remote(logits, history, undefined, mask);
  }

  verify(logits: Float32Array, history: TokenHistory, draft: DraftToken, mask?: TokenMask): VerifiedSample | Promise<VerifiedSample> {
    if (this.plainGreedy && !mask) return (this.local ??= new Sampler(this.params, this.vocabSize)).verify(logits, history, draft);
    return this.remote(logits, history, draft, mask);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.opened) this.channel.release(this.handle);
  }

  private async remote(logits: Float32Array, history: TokenHistory, draft: DraftToken | undefined, mask: TokenMask | undefined): Promise<VerifiedSample> {
    if (logits.length !== this.vocabSize) throw new RangeError(`expected ${this.vocabSize} logits, got ${logits.length}`);
    return this.channel.sample(this.call(history, mask, draft), logits);
  }
}
