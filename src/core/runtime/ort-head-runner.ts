/**
 * The head's own graphs on onnxruntime: token embedding and final norm + LM head.
 */
import type * as Ort from 'onnxruntime-common';
import { EMBED_INPUT_IDS, EMBED_OUTPUT, HEAD_INPUT, HEAD_OUTPUT_LOGITS } from '../model/head-graphs.ts';
import type { ActivationDtype } from '../model/shard-graph.ts';
import type { OrtModule } from './ort-session.ts';
import { checkActivations, type Activations } from './shard-executor.ts';

/** What the head computes locally around the route. */
export interface HeadRunner {
  readonly device: string;
  /** Hidden states [1, ids.length, H] for the given token ids. */
  embed(ids: readonly number[]): Promise<Activations>;
  /** Logits [vocab] of the last position of `hidden`. */
  logits(hidden: Activations): Promise<Float32Array>;
  /** Logits of the last position of each block, in one run (several sessions' steps at once); absent: one `logits` call each. */
  logitsBatch?(hiddens: readonly Activations[]): Promise<Float32Array[]>;
  dispose(): Promise<void>;
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

  async logits(hidden: Activations): Promise<Float32Array> {
    checkActivations(hidden, this.hiddenSize);
    const type = this.dtype === 'fp16' ? 'float16' : 'float32';
    const input = new this.ort.Tensor(type, hidden.data as Float32Array, [1, hidden.tokens, this.hiddenSize]);
    const out = (await this.head.run({ [HEAD_INPUT]: input }))[HEAD_OUTPUT_LOGITS];
    return out.data as Float32Array;
  }

  async logitsBatch(hiddens: readonly Activations[]): Promise<Float32Array[]> {
    if (hiddens.length === 1) return [await this.logits(hiddens[0])];
    const H = this.hiddenSize;
    const rows = this.dtype === 'fp16' ? new Uint16Array(hiddens.length * H) : new Float32Array(hiddens.length * H);
    hiddens.forEach((h, b) => {
      checkActivations(h, H);
      rows.set(h.data.subarray((h.tokens - 1) * H, h.tokens * H), b * H); // each block's last position
    });
    const type = this.dtype === 'fp16' ? 'float16' : 'float32';
    const input = new this.ort.Tensor(type, rows as Float32Array, [hiddens.length, 1, H]);
    const out = (await this.head.run({ [HEAD_INPUT]: input }))[HEAD_OUTPUT_LOGITS].data as Float32Array;
    const V = this.vocabSize;
    return hiddens.map((_, b) => out.slice(b * V, (b + 1) * V));
  }

  async dispose(): Promise<void> {
    await Promise.all([this.embedding.release(), this.head.release()]);
  }
}
