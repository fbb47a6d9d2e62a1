/**
 * The per-sequence token sampler (after llama2.c `run.c` `Sampler`, plus penalties, top-k, min-p
 * and logprobs). Pure: no I/O, no clock; the only randomness is its seeded RNG, so the same seed
 * and the same logits give the same tokens whichever peers computed those logits.
 */

import { createCandidateScratch, selectCandidates, type CandidateScratch } from './candidates.ts';
import { applyTokenMask, ConstraintDeadEndError, type TokenMask } from './constraint.ts';
import { applyPenalties, type TokenHistory } from './penalties.ts';
import { isPlainGreedy, validateSamplingParams, type SamplingParams } from './params.ts';
import { createRng, type Rng, type RngState } from './rng.ts';
import { selectTopN } from './select.ts';
import { verifyDraft, type DraftToken } from './speculative.ts';

/** One token with its log-probability. */
export interface TokenLogprob {
  readonly tokenId: number;
  readonly logprob: number;
}

/**
 * The sampled token. Log-probabilities are the log-softmax of the logits AFTER penalties (and
 * the constraint mask, when one is given) and BEFORE temperature / top-k / top-p / min-p: the
 * model's distribution as adjusted by the penalties and restricted to what the output format
 * allows, independent of how adventurous the sampling was. (OpenAI reports the raw model
 * distribution; we include penalties because they are part of what the request asked the model to
 * score.) exp(logprob) summed over the whole vocabulary is 1.
 */
export interface SampledToken extends TokenLogprob {
  /**
   * The `topLogprobs` most likely tokens under the same distribution, logprob descending, ties to
   * the lower id; empty unless `params.logprobs`. May include the sampled token.
   */
  readonly topLogprobs: readonly TokenLogprob[];
}

/** The token `verify` chose for a drafted position, and whether it is the draft. */
export interface VerifiedSample extends SampledToken {
  /** True when the draft was kept; false when this token replaces it (and later drafts are void). */
  readonly accepted: boolean;
}

const NO_LOGPROBS: readonly TokenLogprob[] = Object.freeze([]);

/**
 * Samples one sequence's tokens. Not shared between sequences: it owns scratch buffers of
 * O(vocabSize) and the RNG whose position advances by exactly one draw per non-greedy sample.
 *
 * Pipeline: penalties → constraint mask → (temperature 0: argmax, ties to the lowest id, no RNG
 * draw) → temperature → top-k → softmax → top-p → min-p → renormalize → draw.
 */
export class Sampler {
  readonly params: SamplingParams;
  readonly vocabSize: number;
  private readonly rng: Rng;
  private readonly penalized: Float64Array; // [vocab]
  private readonly counts: Uint32Array; // [vocab], all zero between calls
  private readonly candidates: CandidateScratch;
  private readonly top: Int32Array; // [topLogprobs]
  private draftScratch: Float64Array | undefined; // [vocab] zeros, for verify's q
  /** Temperature 0 with no penalty and no logprobs: the logits need no copy, only an argmax. */
  private readonly plainGreedy: boolean;

  /**
   * `params` are (re)validated (throws SamplingParamError). `vocabSize` is the logits length.
   * `rng` overrides the generator built from `params.seed` (e.g. one restored from a snapshot);
   * with neither, a random seed is drawn from Math.random.
   */
  constructor(params: SamplingParams, vocabSize: number, rng?: Rng) {
    if (!Number.isSafeInteger(vocabSize) || vocabSize < 1) {
      throw new RangeError(`vocabSize must be a positive integer, got ${vocabSize}`);
    }
    this.params = validateSamplingParams(params);
    this.vocabSize = vocabSize;
    this.rng = rng ?? createRng(this.params.seed ?? Math.floor(Math.random() * 2 ** 32));
    this.penalized = new Float64Array(vocabSize);
    this.counts = new Uint32Array(vocabSize);
    this.candidates = createCandidateScratch(vocabSize);
    this.top = new Int32Array(this.params.topLogprobs);
    this.plainGreedy = isPlainGreedy(this.params);
  }

  /** Snapshot of the RNG, for resuming this sequence elsewhere with `restoreRng`. */
  rngState(): RngState {
    return this.rng.state();
  }

  /**
   * Chooses the next token from `logits` ([vocab], read only, never modified). -Infinity marks a
   * banned token; NaN or +Infinity throws RangeError, as does a length other than vocabSize, a
   * history id outside the vocabulary, or every logit being -Infinity. `logprob` is NaN and
   * `topLogprobs` empty unless `params.logprobs` (their normalizer costs a pass over the vocabulary).
   * `mask` (a {@link TokenMask} from the sequence's constraint) bans every token it does not
   * allow; the draw, greedy choice and logprobs all see only the allowed tokens. A mask that
   * leaves no token throws ConstraintDeadEndError.
   */
  sample(logits: Float32Array, history: TokenHistory, mask?: TokenMask): SampledToken {
    return this.choose(logits, history, undefined, mask);
  }

  /**
   * Chooses the token of a position a drafter guessed (`draft`), so that it is distributed
   * exactly as `sample` would draw it (speculative sampling, see `verifyDraft`). Greedy: the
   * argmax, accepted when it is the draft (no RNG draw). Otherwise: the draft is kept with
   * probability min(1, p/q) under the same distribution `sample` draws from (penalties, the
   * mask, then temperature, top-k, top-p, min-p), else replaced by a draw from the residual;
   * one RNG draw when kept, two when replaced. A draft the mask forbids has p = 0, so it is
   * never kept. Logprobs as `sample`'s. Same errors as `sample`.
   */
  verify(logits: Float32Array, history: TokenHistory, draft: DraftToken, mask?: TokenMask): VerifiedSample {
    return this.choose(logits, history, draft, mask);
  }

  private choose(logits: Float32Array, history: TokenHistory, draft: DraftToken | undefined, mask: TokenMask | undefined): VerifiedSample {
    const { params, vocabSize, penalized } = this;
    if (logits.length !== vocabSize) {
      throw new RangeError(`expected ${vocabSize} logits, got ${logits.length}`);
    }
    if (draft && (!Number.isInteger(draft.tokenId) || draft.tokenId < 0 || draft.tokenId >= vocabSize)) {
      throw new RangeError(`draft token ${draft.tokenId} is outside the vocabulary [0, ${vocabSize})`);
    }
    if (this.plainGreedy && !mask) {
      // a mask needs the masked copy
      const best = this.argmax(logits);
      return { ...best, accepted: best.tokenId === draft?.tokenId };
    }
    for (let i = 0; i < vocabSize; i++) {
      const l = logits[i];
      if (l !== l || l === Infinity) throw new RangeError(`logit ${i} is ${l}`);
      penalized[i] = l;
    }
    applyPenalties(penalized, history, params, this.counts);
    if (mask) applyTokenMask(penalized, mask);

    // Argmax (strict > keeps the lowest id on ties), and the log-softmax normalizer only when
    // logprobs are asked for: it is a pass of exp() over the whole vocabulary.
    let best = -1;
    let max = -Infinity;
    for (let i = 0; i < vocabSize; i++) {
      if (penalized[i] > max) {
        max = penalized[i];
        best = i;
      }
    }
    if (best < 0) {
      if (mask) throw new ConstraintDeadEndError();
      throw new RangeError('cannot sample: every logit is -Infinity');
    }
    let tokenId: number;
    let accepted = false;
    if (params.temperature === 0) {
      tokenId = best;
      accepted = best === draft?.tokenId;
    } else if (!draft) {
      tokenId = this.draw();
    } else {
      const target = selectCandidates(this.penalized, this.params, this.candidates);
      ({ tokenId, accepted } = verifyDraft(target, draft, this.rng, (this.draftScratch ??= new Float64Array(vocabSize))));
    }
    if (!params.logprobs) return { tokenId, accepted, logprob: Number.NaN, topLogprobs: NO_LOGPROBS };
    let sum = 0;
    for (let i = 0; i < vocabSize; i++) sum += Math.exp(penalized[i] - max); // exp(-Infinity) = 0
    const logNormalizer = max + Math.log(sum);
    const topLogprobs: TokenLogprob[] = [];
    if (params.topLogprobs > 0) {
      const n = selectTopN(penalized, params.topLogprobs, this.top);
      for (let k = 0; k < n; k++) {
        const id = this.top[k];
        topLogprobs.push({ tokenId: id, logprob: penalized[id] - logNormalizer });
      }
    }
    return { tokenId, accepted, logprob: penalized[tokenId] - logNormalizer, topLogprobs };
  }

  /** Greedy without penalties or logprobs: one pass over the logits, no copy. */
  private argmax(logits: Float32Array): SampledToken {
    let best = -1;
    let max = -Infinity;
    for (let i = 0; i < logits.length; i++) {
      const l = logits[i];
      if (l !== l || l === Infinity) throw new RangeError(`logit ${i} is ${l}`);
      if (l > max) {
        max = l;
        best = i;
      }
    }
    if (best < 0) throw new RangeError('cannot sample: every logit is -Infinity');
    return { tokenId: best, logprob: Number.NaN, topLogprobs: NO_LOGPROBS };
  }

  /** One RNG draw over the filtered distribution of the penalized logits. */
  private draw(): number {
    const { ids, probs, count } = selectCandidates(this.penalized, this.params, this.candidates);
    const r = this.rng.next();
    let cumulative = 0;
    let lastPositive = 0;
    for (let k = 0; k < count; k++) {
      if (probs[k] <= 0) continue;
      cumulative += probs[k];
      lastPositive = k;
      if (r < cumulative) return ids[k];
    }
    return ids[lastPositive]; // r landed in the rounding gap just below 1
  }
}
