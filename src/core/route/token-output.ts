/**
 * What a Route Session makes of each position's logits — the one place that samples: the
 * chosen token (drawn, or a draft verified so that it is distributed as a draw would be; within
 * the constraint's mask when the answer has a grammar), its text delta (stop strings held back
 * until they cannot match), and the end of generation (a stop token, a stop string, the token
 * budget, the model's natural end). It also trims a speculative step's drafts to what the answer can take (the budget,
 * stop tokens, stop strings, the grammar), so no position is verified that the sampler could
 * never keep.
 * Pure: no hops, no clock.
 */
import type { NaturalEnd } from '../model/generation-limits.ts';
import { StreamDecoder } from '../model/stream-decoder.ts';
import type { TextTokenizer } from '../model/tokenizer.ts';
import { localSampler, maskAllows, StopChecker, StopStringMatcher, type DraftToken, type FinishReason, type SamplerFactory, type SamplingParams, type SequenceSampler, type TokenConstraint, type TokenHistory, type TokenMask, type VerifiedSample } from '../sampling/index.ts';
import type { SessionEvent } from './route-types.ts';

export type TokenEvent = Extract<SessionEvent, { type: 'token' }>;
export type DoneEvent = Extract<SessionEvent, { type: 'done' }>;

/** What one position gave: its token event (absent for a stop token), the end, and whether its draft was kept. */
export interface PositionOutput {
  readonly token?: TokenEvent;
  readonly done?: DoneEvent;
  /** True when a draft was given and kept; false when there was none or it was replaced. */
  readonly accepted: boolean;
}

/** Generated tokens decoded together with a draft when checking it against the stop strings. */
const STOP_WINDOW = 16;

export class TokenOutput {
  readonly generated: number[] = [];
  /** The prompt and every token chosen so far (what a drafter continues). */
  readonly context: number[];
  private readonly sampler: SequenceSampler;
  private readonly stop: StopChecker;
  private readonly decoder: StreamDecoder | undefined;
  private readonly matcher: StopStringMatcher | undefined;
  /** The next position's mask, computed early to see whether the grammar lets the answer end (consumed by `next`). */
  private nextMaskEarly: TokenMask | undefined;
  /** Masks `fitDraft` computed for the drafts of the step under way, in order (consumed by `next`). */
  private readonly fittedMasks: { readonly tokenId: number; readonly mask: TokenMask | undefined }[] = [];

  constructor(
    private readonly params: SamplingParams,
    vocabSize: number,
    private readonly promptIds: readonly number[],
    private readonly tokenizer?: TextTokenizer,
    private readonly stopStrings?: readonly string[],
    /** Asked for each position's mask and told each chosen token; the session disposes it. */
    private readonly constraint?: TokenConstraint,
    /** Ends the answer (`stop`, the token emitted) after one of its tokens once it is long enough. */
    private readonly naturalEnd?: NaturalEnd,
    /** Where the tokens are sampled (default: a Sampler on this thread). */
    samplers: SamplerFactory = localSampler,
  ) {
    this.sampler = samplers(params, vocabSize);
    this.stop = new StopChecker(params);
    this.decoder = tokenizer ? new StreamDecoder(tokenizer) : undefined;
    this.matcher = stopStrings?.length ? new StopStringMatcher(stopStrings) : undefined;
    this.context = [...promptIds];
  }

  /** Frees the sampler's state (idempotent). */
  dispose(): void {
    this.sampler.dispose();
  }

  /** How many drafts a step may verify: the budget left, less the token of the step's own. */
  get room(): number {
    return Math.max(0, this.params.maxTokens - this.generated.length - 1);
  }

  /**
   * The token of the next position from its `logits` ([vocab]). With `draft`, the draft is
   * verified (kept, or replaced by a token drawn so that the position is distributed as
   * without it). Under a constraint, the position's mask restricts the choice (a draft
   * `fitDraft` checked reuses the mask it computed). Returns the token event (absent for a stop
   * token, which is never emitted), the done event when generation ends with it (carrying the
   * text still held back), and whether the draft was kept.
   */
  async next(logits: Float32Array, draft?: DraftToken): Promise<PositionOutput> {
    if (draft) return this.position(draft, (sampler, history, mask) => sampler.verify(logits, history, draft, mask));
    return this.position(undefined, async (sampler, history, mask) => ({ ...(await sampler.sample(logits, history, mask)), accepted: false }));
  }

  /**
   * Like `next`, where the logits are not here: `pick` is handed this answer's sampler, the
   * history and the position's mask, and returns the token it sampled or verified `draft` to
   * (e.g. beside the head that computed the logits, see head-pick.ts).
   */
  async nextPicked(draft: DraftToken | undefined, pick: (sampler: SequenceSampler, history: TokenHistory, mask: TokenMask | undefined) => Promise<VerifiedSample>): Promise<PositionOutput> {
    return this.position(draft, pick);
  }

  /** True when a grammar constrains the answer (its positions' masks follow the tokens chosen). */
  get constrained(): boolean {
    return this.constraint !== undefined;
  }

  private async position(draft: DraftToken | undefined, choose: (sampler: SequenceSampler, history: TokenHistory, mask: TokenMask | undefined) => Promise<VerifiedSample> | VerifiedSample): Promise<PositionOutput> {
    const history = { prompt: this.promptIds, generated: this.generated };
    const fitted = draft && this.fittedMasks[0]?.tokenId === draft.tokenId ? this.fittedMasks.shift() : undefined;
    const early = this.nextMaskEarly;
    this.nextMaskEarly = undefined;
    const mask = fitted ? fitted.mask : (early ?? (await this.constraint?.nextMask()));
    const sampled = await choose(this.sampler, history, mask);
    if (!sampled.accepted) this.fittedMasks.length = 0; // the drafts after a replaced one are void
    this.constraint?.accept(sampled.tokenId);
    this.generated.push(sampled.tokenId);
    this.context.push(sampled.tokenId);
    let finishReason: FinishReason | undefined = this.stop.check(sampled.tokenId, this.generated.length);
    let token: TokenEvent | undefined;
    if (finishReason !== 'stop') {
      const delta = this.decoder?.push(sampled.tokenId) ?? '';
      const matched = this.matcher ? this.matcher.push(delta) : { emit: delta, stopped: false };
      if (matched.stopped || (this.endsNaturally(sampled.tokenId, this.generated.length) && (await this.grammarMayEnd()))) finishReason = 'stop';
      token = { type: 'token', tokenId: sampled.tokenId, text: matched.emit, logprob: sampled.logprob, topLogprobs: sampled.topLogprobs };
    }
    const accepted = sampled.accepted;
    if (!finishReason) return { token, accepted };
    return { token, accepted, done: { type: 'done', finishReason, text: this.tail(), usage: { promptTokens: this.promptIds.length, completionTokens: this.generated.length } } };
  }

  /**
   * `drafts` cut to what this answer can keep: at most `room`, ending at the first draft that
   * would end generation (a stop token, or the token that completes a stop string) — verifying
   * positions after it is wasted work — and, under a constraint, before the first draft its
   * grammar forbids (the sampler could never keep it). The masks computed on the way are kept
   * for `next`, which needs the same ones when the drafts are kept; the constraint ends where
   * it began.
   */
  async fitDraft(drafts: readonly DraftToken[]): Promise<DraftToken[]> {
    this.nextMaskEarly = undefined; // the walk asks for it again
    const fitted = drafts.slice(0, this.room);
    const stopIds = this.params.stopTokenIds;
    const end = fitted.findIndex((d, i) => stopIds.includes(d.tokenId) || this.endsNaturally(d.tokenId, this.generated.length + i + 1));
    if (end >= 0) fitted.length = end + 1;
    this.cutAtStopString(fitted);
    await this.cutAtGrammar(fitted);
    return fitted;
  }

  /**
   * Whether the grammar (if any) lets the answer end here: a stop token is allowed next (free
   * text under `tool_choice: auto`, never inside a call or an unfinished JSON value). The mask
   * is kept for the next position.
   */
  private async grammarMayEnd(): Promise<boolean> {
    if (!this.constraint) return true;
    if (this.constraint.finished) return true;
    const mask = await this.constraint.nextMask();
    this.nextMaskEarly = mask;
    return mask === undefined || this.params.stopTokenIds.some((id) => maskAllows(mask, id));
  }

  /** Whether `tokenId`, the answer's `count`-th token, is a natural end. */
  private endsNaturally(tokenId: number, count: number): boolean {
    return this.naturalEnd !== undefined && count >= this.naturalEnd.minTokens && this.naturalEnd.tokenIds.includes(tokenId);
  }

  private cutAtStopString(fitted: DraftToken[]): void {
    if (!this.tokenizer || !this.stopStrings?.length || fitted.length === 0) return;
    const tail = this.generated.slice(-STOP_WINDOW);
    const before = this.tokenizer.decode(tail).length;
    for (let i = 0; i < fitted.length; i++) {
      const text = this.tokenizer.decode([...tail, ...fitted.slice(0, i + 1).map((d) => d.tokenId)]);
      // A stop string that ends inside the draft's text ends generation at draft i.
      if (this.stopStrings.some((s) => s !== '' && endsAfter(text, s, before))) {
        fitted.length = i + 1;
        return;
      }
    }
  }

  /** Walks the constraint along the drafts (mask, check, accept), cuts at the first refusal, and rolls back. */
  private async cutAtGrammar(fitted: DraftToken[]): Promise<void> {
    this.fittedMasks.length = 0;
    const constraint = this.constraint;
    if (!constraint || fitted.length === 0) return;
    let walked = 0;
    try {
      for (; walked < fitted.length; walked++) {
        if (constraint.finished) break; // the grammar ended: only the stop token may follow, which next() samples itself
        const mask = await constraint.nextMask();
        const { tokenId } = fitted[walked];
        if (mask && !maskAllows(mask, tokenId)) break;
        this.fittedMasks.push({ tokenId, mask });
        constraint.accept(tokenId);
      }
    } finally {
      constraint.rollback(walked);
    }
    fitted.length = walked;
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

/** True when `needle` occurs in `text` ending after index `from`. */
function endsAfter(text: string, needle: string, from: number): boolean {
  const at = text.indexOf(needle, Math.max(0, from - needle.length + 1));
  return at >= 0;
}
