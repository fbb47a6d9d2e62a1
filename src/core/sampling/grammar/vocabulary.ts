/**
 * The vocabulary as a grammar engine reads it: every token's string by id and how to turn those
 * strings back into bytes. Plain data; `readTokenVocabulary` (src/core/model) builds it from a
 * tokenizer.json.
 */

/** How a token string maps to bytes (xgrammar's `vocab_type`). */
export type VocabularyKind = 'byte_level' | 'byte_fallback' | 'raw';

export interface TokenVocabulary {
  /**
   * Token strings by id, exactly as in tokenizer.json. Special tokens (control tokens such as
   * `<|im_start|>`, `<s>`) and ids without a token are `''`: a grammar can never spell text
   * with them, and an engine treats empty tokens as special.
   */
  readonly tokens: readonly string[];
  readonly kind: VocabularyKind;
  /** The tokenizer prepends a space (`▁`) to the text it encodes (SentencePiece `Prepend`). */
  readonly addPrefixSpace: boolean;
  /** Ids of the special added tokens (their text is in {@link specialTokenText}). */
  readonly specialTokenText: ReadonlyMap<number, string>;
}
