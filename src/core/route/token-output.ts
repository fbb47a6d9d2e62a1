/**
 * What a Route Session makes of each step's logits: the sampled token (within the constraint's
 * mask, when the answer has a grammar), its text delta (stop strings held back until they
 * cannot match), and the end of generation (a stop token, a stop string, the token budget).
 * Pure: no hops, no clock.
 */
import { StreamDecoder } from '../model/stream-decoder.ts';
import type { TextTokenizer } from '../model/tokenizer.ts';
import { Sampler, StopChecker, StopStringMatcher, type FinishReason, type SamplingParams, type TokenConstraint } from '../sampling/index.ts';
import type { SessionEvent } from './route-types.ts';

export type TokenEvent = Extract<SessionEvent, { type: 'token' }>;
export type DoneEvent = Extract<SessionEvent, { type: 'done' }>;

export class TokenOutput {
  readonly generated: number[] = [];
  private readonly sampler: Sampler;
  private readonly stop: StopChecker;
  private readonly decoder: StreamDecoder | undefined;
  private readonly matcher: StopStringMatcher | undefined;

  constructor(
    params: SamplingParams,
    vocabSize: number,
    private readonly promptIds: readonly number[],
    tokenizer?: TextTokenizer,
    stopStrings?: readonly string[],
    /** Asked for each step's mask and told each chosen token; the session disposes it. */
    private readonly constraint?: TokenConstraint,
  ) {
    this.sampler = new Sampler(params, vocabSize);
    this.stop = new StopChecker(params);
    this.decoder = tokenizer ? new StreamDecoder(tokenizer) : undefined;
    this.matcher = stopStrings?.length ? new StopStringMatcher(stopStrings) : undefined;
  }

  /**
   * Sample the next token from `logits` ([vocab], the last position). Returns the token event
   * (absent for a stop token, which is never emitted) and, when generation ends with it, the
   * done event carrying the text still held back. Async for the constraint's mask.
   */
  async next(logits: Float32Array): Promise<{ token?: TokenEvent; done?: DoneEvent }> {
    const mask = await this.constraint?.nextMask();
    const sampled = this.sampler.sample(logits, { prompt: this.promptIds, generated: this.generated }, mask);
    this.constraint?.accept(sampled.tokenId);
    this.generated.push(sampled.tokenId);
    let finishReason: FinishReason | undefined = this.stop.check(sampled.tokenId, this.generated.length);
    let token: TokenEvent | undefined;
    if (finishReason !== 'stop') {
      const delta = this.decoder?.push(sampled.tokenId) ?? '';
      const matched = this.matcher ? this.matcher.push(delta) : { emit: delta, stopped: false };
      if (matched.stopped) finishReason = 'stop';
      token = { type: 'token', tokenId: sampled.tokenId, text: matched.emit, logprob: sampled.logprob, topLogprobs: sampled.topLogprobs };
    }
    if (!finishReason) return { token };
    return { token, done: { type: 'done', finishReason, text: this.tail(), usage: { promptTokens: this.promptIds.length, completionTokens: this.generated.length } } };
  }

  /** Text held back at the end: the decoder's rest, through the stop-string matcher. */
  private tail(): string {
    if (this.matcher?.stopped) return '';
    const rest = this.decoder?.flush() ?? '';
    if (!this.matcher) return rest;
    const emitted = this.matcher.push(rest).emit;
    return emitted + (this.matcher.stopped ? '' : this.matcher.flush());
  }
}
