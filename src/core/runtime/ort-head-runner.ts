/**
 * The head's own graphs on onnxruntime: token embedding and final norm + LM head.
 */
import type * as Ort from 'onnxruntime-common';
import { EMBED_INPUT_IDS, EMBED_OUTPUT, HEAD_INPUT, HEAD_INPUT_POSITIONS, HEAD_OUTPUT_LOGITS } from '../model/head-graphs.ts';
import type { ActivationDtype } from '../model/activations.ts';
import type { DraftToken, SequenceSampler, TokenHistory, TokenMask, VerifiedSample } from '../sampling/index.ts';
import type { OrtModule } from './ort-session.ts';
import { checkActivations, type Activations } from './shard-executor.ts';

/** What the head computes locally around the route. */
export interface HeadRunner {
  readonly device: string;
  /** Hidden states [1, ids.length, H] for the given token ids. */
  embed(ids: readonly number[]): Promise<Activations>;
  /**
   * Logits of the positions `rows` of `hidden` (indices into its `tokens`, default the last
   * one): [rows.length, vocab] row-major, so row i is `subarray(i × vocab, (i + 1) × vocab)`.
   * A speculative step asks for every position it verifies. Throws RangeError for a row
   * outside `[0, hidden.tokens)`.
   */
  logits(hidden: Activations, rows?: readonly number[]): Promise<Float32Array>;
  /**
   * Logits of several blocks in one run (several sessions' steps at once): for block b the
   * rows `rows[b]` (default its last position), [rows[b].length, vocab] each. Absent: one
   * `logits` call each.
   */
  logitsBatch?(hiddens: readonly Activations[], rows?: readonly (readonly number[] | undefined)[]): Promise<Float32Array[]>;
  /**
   * Several blocks in one run, where a block with a `pick` answers the tokens its sampler chose
   * for its rows instead of their logits (head-pick.ts): the logits stay where they were computed (the
   * Node head worker samples beside its LM head, so the 0.6 MB row of a 151,936-token vocabulary
   * never reaches the event loop). A pick's sampler that this runner did not make samples the
   * row from logits as `sample` would. Resolves once the head can take its next run, with one
   * promise per block, in block order, that settles when that block's result is ready (picks
   * may still be sampling elsewhere); a block whose sampler failed (a grammar dead end) answers
   * its error, and the others are unaffected; a failure of the run itself (a RangeError for a
   * row) rejects the call. Absent: head-pick.ts fetches the logits and samples.
   */
  startBlocks?(blocks: readonly HeadBlock[]): Promise<Promise<HeadBlockResult>[]>;
  dispose(): Promise<void>;
}

/** A block's rows sampled where the head computed them. */
export interface HeadPick {
  readonly sampler: SequenceSampler;
  readonly history: TokenHistory;
  /** The first row's mask (a pick with drafts has none: a constrained step with drafts is verified where its masks are). */
  readonly mask?: TokenMask;
  /** The block's rows are drafts.length + 1: row i verifies drafts[i], the last one samples. */
  readonly drafts?: readonly DraftToken[];
}

/** One block of a head run: its rows' logits (default its last position), or with `pick` its rows' tokens. */
export interface HeadBlock {
  readonly hidden: Activations;
  readonly rows?: readonly number[];
  readonly pick?: HeadPick;
}

/** A block's logits ([rows, vocab]), its pick's tokens (in row order, up to the first replaced draft), or its pick's error. */
export type HeadBlockResult = Float32Array | readonly VerifiedSample[] | Error;

export class OrtHeadRunner implements HeadRunner {
  constructor(
    private readonly ort: OrtModule,
    private readonly embedding: Ort.InferenceSession,
    private readonly head: Ort.InferenceSession,
    private readonly hiddenSize: number,
    private readonly vocabSize: number,
    private readonly dtype: ActivationDtype,
    readonly device: string,
  ) {}

  async embed(ids: readonly number[]): Promise<Activations> {
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) throw new RangeError(`token id ${id} is outside the vocabulary [0, ${this.vocabSize})`);
    }
    const input = new this.ort.Tensor('int64', BigInt64Array.from(ids, (id) => BigInt(id)), [1, ids.length]);
    const out = (await this.embedding.run({ [EMBED_INPUT_IDS]: input }))[EMBED_OUTPUT];
    return { dtype: this.dtype, data: out.data as Float32Array | Uint16Array, tokens: ids.length, hiddenSize: this.hiddenSize };
  }

  async logits(hidden: Activations, rows: readonly number[] = [hidden.tokens - 1]): Promise<Float32Array> {
    checkActivations(hidden, this.hiddenSize);
    if (rows.length === 0) throw new RangeError('logits of no position were asked for');
    for (const row of rows) {
      if (!Number.isInteger(row) || row < 0 || row >= hidden.tokens) throw new RangeError(`position ${row} is outside the ${hidden.tokens} positions given`);
    }
    const type = this.dtype === 'fp16' ? 'float16' : 'float32';
    const input = new this.ort.Tensor(type, hidden.data as Float32Array, [1, hidden.tokens, this.hiddenSize]);
    const positions = new this.ort.Tensor('int64', BigInt64Array.from(rows, (r) => BigInt(r)), [rows.length]);
    const out = (await this.head.run({ [HEAD_INPUT]: input, [HEAD_INPUT_POSITIONS]: positions }))[HEAD_OUTPUT_LOGITS];
    return out.data as Float32Array;
  }

  async logitsBatch(hiddens: readonly Activations[], rows: readonly (readonly number[] | undefined)[] = []): Promise<Float32Array[]> {
    if (hiddens.length === 1) return [await this.logits(hiddens[0], rows[0])];
    // The rows asked for, side by side as one sequence; the graph gathers every one of them.
    const H = this.hiddenSize;
    const picked = hiddens.map((h, b) => {
      checkActivations(h, H);
      const these = rows[b] ?? [h.tokens - 1];
      if (these.length === 0) throw new RangeError('logits of no position were asked for');
      for (const row of these) {
        if (!Number.isInteger(row) || row < 0 || row >= h.tokens) throw new RangeError(`position ${row} is outside the ${h.tokens} positions given`);
      }
      return these;
    });
    const total = picked.reduce((n, these) => n + these.length, 0);
    const data = this.dtype === 'fp16' ? new Uint16Array(total * H) : new Float32Array(total * H);
    let at = 0;
    hiddens.forEach((h, b) => {
      for (const row of picked[b]) data.set(h.data.subarray(row * H, (row + 1) * H), at++ * H);
    });
    const type = this.dtype === 'fp16' ? 'float16' : 'float32';
    const input = new this.ort.Tensor(type, data as Float32Array, [1, total, H]);
    const positions = new this.ort.Tensor('int64', BigInt64Array.from({ length: total }, (_, i) => BigInt(i)), [total]);
    const out = (await this.head.run({ [HEAD_INPUT]: input, [HEAD_INPUT_POSITIONS]: positions }))[HEAD_OUTPUT_LOGITS].data as Float32Array;
    const V = this.vocabSize;
    let from = 0;
    // Views of the one output, not copies (16 rows of a 151,936-token vocabulary are 9.7 MB a step).
    return picked.map((these) => out.subarray(from * V, (from += these.length) * V));
  }

  async dispose(): Promise<void> {
    await Promise.all([this.embedding.release(), this.head.release()]);
  }
}
