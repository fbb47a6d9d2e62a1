/**
 * Per-hop input history (Petals `client/inference_session.py`): every activation block the
 * head sent to one hop, so that hop alone can be rebuilt — after a cache miss, or on a
 * replacement peer — by replaying it as one prefill.
 */
import type { Activations } from '../runtime/shard-executor.ts';

/**
 * The recorded inputs of one hop for one session, positions `[0, length)`.
 *
 * Ownership: `record` keeps a reference to the block's data (no copy); do not write to it
 * afterwards. Chunks are concatenated only when `replay` is called, and the result replaces
 * them, so a second replay is free and memory is never held twice.
 */
export class HopHistory {
  #chunks: Activations[] = []; // each [1, tokens, hiddenSize], in position order
  #length = 0;
  /** Positions of each block as the peer computed it (a prefill, then one block per step), in order; their sum is `length`. */
  #blocks: number[] = [];

  /** Positions recorded. */
  get length(): number {
    return this.#length;
  }

  /** Bytes of activation data held. */
  get bytes(): number {
    let total = 0;
    for (const chunk of this.#chunks) total += chunk.data.byteLength;
    return total;
  }

  /**
   * Append a block that starts at `startPosition`. Throws RangeError unless `startPosition`
   * equals `length` (history is contiguous), the block's data matches its shape, and its dtype
   * and hidden size match what is already recorded.
   */
  record(startPosition: number, activations: Activations): void {
    if (startPosition !== this.#length) {
      throw new RangeError(`history holds ${this.#length} positions; a block cannot start at ${startPosition}`);
    }
    const { dtype, data, tokens, hiddenSize } = activations;
    if (!Number.isSafeInteger(tokens) || tokens < 1 || !Number.isSafeInteger(hiddenSize) || hiddenSize < 1) {
      throw new RangeError(`an activation block needs ≥ 1 token and a positive hidden size, got ${tokens} × ${hiddenSize}`);
    }
    if (data.length !== tokens * hiddenSize) {
      throw new RangeError(`activation data holds ${data.length} values, expected ${tokens} × ${hiddenSize}`);
    }
    if ((dtype === 'fp32') !== (data instanceof Float32Array)) {
      throw new RangeError(`dtype ${dtype} does not match its ${data.constructor.name}`);
    }
    const first = this.#chunks[0];
    if (first && (first.dtype !== dtype || first.hiddenSize !== hiddenSize)) {
      throw new RangeError(`block is ${dtype} × ${hiddenSize}, history is ${first.dtype} × ${first.hiddenSize}`);
    }
    this.#chunks.push(activations);
    this.#length += tokens;
    this.#blocks.push(tokens);
  }

  /**
   * The peer rebuilt its state from the whole history as one prefill (a stale hop, a
   * replacement): from now on its path is that one block, then the blocks after it.
   */
  rebuilt(): void {
    this.#blocks = this.#length > 0 ? [this.#length] : [];
  }

  /**
   * The history cut the way the peer computed it — each block with its start position, in
   * order (views of the data, no copy): replaying them one run at a time on one session is the
   * peer's own sequence of steps. Throws RangeError if empty.
   */
  steps(): { readonly start: number; readonly activations: Activations }[] {
    const whole = this.replay();
    const out: { start: number; activations: Activations }[] = [];
    let start = 0;
    for (const tokens of this.#blocks) {
      const data = whole.data.subarray(start * whole.hiddenSize, (start + tokens) * whole.hiddenSize);
      out.push({ start, activations: { ...whole, tokens, data } as Activations });
      start += tokens;
    }
    return out;
  }

  /** Every recorded position as one prefill block, starting at position 0. Throws RangeError if empty. */
  replay(): Activations {
    const first = this.#chunks[0];
    if (!first) throw new RangeError('nothing recorded to replay');
    if (this.#chunks.length === 1) return first;
    const data = first.dtype === 'fp32'
      ? new Float32Array(this.#length * first.hiddenSize)
      : new Uint16Array(this.#length * first.hiddenSize);
    let offset = 0;
    for (const chunk of this.#chunks) {
      data.set(chunk.data, offset);
      offset += chunk.data.length;
    }
    const whole: Activations = { dtype: first.dtype, data, tokens: this.#length, hiddenSize: first.hiddenSize };
    this.#chunks = [whole];
    return whole;
  }

  /** Keep positions `[0, length)` (a rollback). Throws RangeError outside `[0, this.length]`. */
  truncate(length: number): void {
    if (!Number.isSafeInteger(length) || length < 0 || length > this.#length) {
      throw new RangeError(`cannot truncate history of ${this.#length} positions to ${length}`);
    }
    let kept = 0;
    const chunks: Activations[] = [];
    for (const chunk of this.#chunks) {
      if (kept >= length) break;
      const take = Math.min(chunk.tokens, length - kept);
      // A cut chunk is copied so the dropped tail's buffer can be freed.
      chunks.push(take === chunk.tokens ? chunk : { ...chunk, data: chunk.data.slice(0, take * chunk.hiddenSize), tokens: take });
      kept += take;
    }
    this.#chunks = chunks;
    this.#length = length;
    let left = length;
    const blocks: number[] = [];
    for (const tokens of this.#blocks) {
      if (left <= 0) break;
      blocks.push(Math.min(tokens, left));
      left -= tokens;
    }
    this.#blocks = blocks;
  }
}
