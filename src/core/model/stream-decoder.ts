/**
 * Incremental detokenization for streaming generated text.
 *
 * Decoding token by token is wrong for most tokenizers: a byte-level or byte-fallback token
 * may carry half of a UTF-8 character, and SentencePiece-style decoders strip or add
 * spaces depending on the neighbouring tokens. So each push decodes a window of the
 * generated ids and emits only the new, stable suffix of the text:
 *
 *   - text ending in U+FFFD (an incomplete UTF-8 sequence) is held back until the bytes
 *     that complete it arrive, or until {@link StreamDecoder.flush};
 *   - the window starts one emitted step back (`prefixStart`), so the decoder sees the
 *     context that decides spacing; the delta is `decode(window) − decode(window prefix)`.
 *
 * Windowing (as in Hugging Face TGI and vLLM) keeps each push O(window) instead of
 * re-decoding the whole generation; for the decoders of tokenizer.json it yields the same
 * text as decoding the full list. Invariant: the concatenation of every push and the final
 * flush equals `tokenizer.decode(allIds, { skipSpecialTokens })`.
 */
import type { TextTokenizer } from './tokenizer.ts';

const REPLACEMENT_CHARACTER = '\uFFFD';

export interface StreamDecoderOptions {
  /**
   * Drop special tokens (bos, eos, chat markers) from the streamed text. Default true:
   * streamed text is for people, and generation stops at eos anyway.
   */
  readonly skipSpecialTokens?: boolean;
}

/** Turns generated token ids into text deltas. One instance per generated sequence. */
export class StreamDecoder {
  readonly #tokenizer: TextTokenizer;
  readonly #skipSpecialTokens: boolean;
  readonly #ids: number[] = [];
  /** Window start: ids before it are fully emitted and no longer decoded. */
  #prefixStart = 0;
  /** Ids in [prefixStart, readStart) have been emitted; ids from readStart are pending. */
  #readStart = 0;

  constructor(tokenizer: TextTokenizer, opts: StreamDecoderOptions = {}) {
    this.#tokenizer = tokenizer;
    this.#skipSpecialTokens = opts.skipSpecialTokens ?? true;
  }

  /** Every id pushed so far, in order. */
  get ids(): readonly number[] {
    return this.#ids;
  }

  /**
   * Adds one generated id and returns the text it completes: possibly `''` (an incomplete
   * character, or a special token being skipped), possibly several characters.
   */
  push(tokenId: number): string {
    this.#ids.push(tokenId);
    const emitted = this.#decode(this.#prefixStart, this.#readStart);
    const window = this.#decode(this.#prefixStart, this.#ids.length);
    if (window.endsWith(REPLACEMENT_CHARACTER) || window.length <= emitted.length) return '';
    this.#prefixStart = this.#readStart;
    this.#readStart = this.#ids.length;
    return window.slice(emitted.length);
  }

  /**
   * Returns whatever is still held back (an incomplete character decodes to U+FFFD here)
   * and marks everything emitted. Call once when generation ends; pushing afterwards
   * continues the same sequence.
   */
  flush(): string {
    const emitted = this.#decode(this.#prefixStart, this.#readStart);
    const window = this.#decode(this.#prefixStart, this.#ids.length);
    this.#prefixStart = this.#readStart;
    this.#readStart = this.#ids.length;
    return window.length > emitted.length ? window.slice(emitted.length) : '';
  }

  #decode(start: number, end: number): string {
    if (end <= start) return '';
    return this.#tokenizer.decode(this.#ids.slice(start, end), {
      skipSpecialTokens: this.#skipSpecialTokens,
    });
  }
}
