/**
 * The head's own graphs on onnxruntime: token embedding and final norm + LM head.
 */
import type * as Ort from 'onnxruntime-common';
import { EMBED_INPUT_IDS, EMBED_OUTPUT, HEAD_INPUT, HEAD_INPUT_POSITIONS, HEAD_OUTPUT_LOGITS } from '../model/head-graphs.ts';
import type { ActivationDtype } from '../model/activations.ts';
import type { SampledToken, SequenceSampler, TokenHistory, TokenMask } from '../sampling/index.ts';
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
   * Several blocks in one run, where a block with a `pick` answers the token its sampler chose
   * for its one row instead of that row's logits: the logits stay where they were computed (the
   * Node head worker samples beside its LM head, so the 0.6 MB row of a 151,936-token vocabulary
   * never reaches the event loop). A pick's sampler that this runner did not make samples the
   * row from logits as `sample` would. Results in block order; a block whose sampler failed
   * (a grammar dead end) answers its error, and the others are unaffected; a failure of the run
   * itself (a RangeError for a row) rejects the call. Absent: `pickToken` fetches the logits and
   * samples.
   */
  runBlocks?(blocks: readonly HeadBlock[]): Promise<HeadBlockResult[]>;
  dispose(): Promise<void>;
}

/** A row sampled where the head computed its logits: `sampler.sample(logits, history, mask)`. */
export interface HeadPick {
  readonly sampler: SequenceSampler;
  readonly history: TokenHistory;
  readonly mask?: TokenMask;
}

/** One block of a head run: its rows' logits (default its last position), or with `pick` the token of its one row. */
export interface HeadBlock {
  readonly hidden: Activations;
  readonly rows?: readonly number[];
  readonly pick?: HeadPick;
}

/** A block's logits ([rows, vocab]), the token its pick sampled, or its pick's error. */
export type HeadBlockResult = Float32Array | SampledToken | Error;

/** The token of `hidden`'s position `row`, sampled by `pick` beside the head's logits when the head can. */
export async function pickToken(head: HeadRunner, hidden: Activations, row: number, pick: HeadPick): Promise<SampledToken> {
  if (head.runBlocks) return asToken((await head.runBlocks([{ hidden, rows: [row], pick }]))[0]);
  return pick.sampler.sample(await head.logits(hidden, [row]), pick.history, pick.mask);
}

/** A picked block's result (a runner that answers logits for a pick has broken its contract). */
export function asToken(result: HeadBlockResult): SampledToken {
  if (result instanceof Error) throw result;
  if (result instanceof Float32Array) throw new Error('the head answered logits where a token was asked for');
  return result;
}

/**
 * `blocks` run as `logitsBatch` (or `logits` one after another); once the logits are back, one
 * promise per block: its rows, or its pick's token sampled here. Every pick is asked in the same
 * turn, so samplers that batch their calls (the sampler worker) send them together.
 */
export async function startBlocksLocally(head: HeadRunner, blocks: readonly HeadBlock[]): Promise<Promise<HeadBlockResult>[]> {
  for (const b of blocks) {
    if (b.pick && b.rows && b.rows.length !== 1) throw new RangeError(`a picked block samples one row, got ${b.rows.length}`);
  }
  let rows: Float32Array[];
  if (blocks.length > 1 && head.logitsBatch) rows = await head.logitsBatch(blocks.map((b) => b.hidden), blocks.map((b) => b.rows));
  else {
    rows = [];
    for (const b of blocks) rows.push(await head.logits(b.hidden, b.rows));
  }
  return blocks.map(async (b, i): Promise<HeadBlockResult> => {
    if (!b.pick) return rows[i];
    try {
      return await b.pick.sampler.sample(rows[i], b.pick.history, b.pick.mask);
    } catch (error) {
      return error instanceof Error ? error : new Error(String(error));
    }
  });
}

/** `startBlocksLocally`, every block settled. */
export async function runBlocksLocally(head: HeadRunner, blocks: readonly HeadBlock[]): Promise<HeadBlockResult[]> {
  return Promise.all(await startBlocksLocally(head, blocks));
}

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
