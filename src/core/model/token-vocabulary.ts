/**
 * The vocabulary as a grammar engine needs it: every token's string as tokenizer.json stores
 * it (byte-level `Ġ`, SentencePiece `▁` and `<0x0A>`), by id, plus how to read those strings
 * back into bytes. Pure: computed from the parsed tokenizer.json.
 *
 * The detection rules follow xgrammar's `HFTokenizerAnalyzer` (a `ByteLevel` decoder means
 * byte-level BPE; a `ByteFallback` decoder means SentencePiece with byte fallback; anything else
 * is raw text), so the engine reads each token exactly as the tokenizer's decoder would.
 */

import type { TokenVocabulary, VocabularyKind } from '../sampling/grammar/vocabulary.ts';

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The steps of a `Sequence` (decoders, normalizers), or the component itself. */
function steps(component: unknown, key: string): Json[] {
  if (!isObject(component)) return [];
  if (component.type === 'Sequence' && Array.isArray(component[key])) return (component[key] as unknown[]).filter(isObject);
  return [component];
}

function detectKind(tokenizerJson: Json): VocabularyKind {
  for (const decoder of steps(tokenizerJson.decoder, 'decoders')) {
    if (decoder.type === 'ByteLevel') return 'byte_level';
    if (decoder.type === 'ByteFallback') return 'byte_fallback';
  }
  return 'raw';
}

function detectPrefixSpace(tokenizerJson: Json): boolean {
  if (steps(tokenizerJson.normalizer, 'normalizers').some((n) => n.type === 'Prepend' && n.prepend === '▁')) return true;
  const pre = tokenizerJson.pre_tokenizer;
  return isObject(pre) && pre.type === 'Metaspace' && (pre.prepend_scheme === 'always' || pre.prepend_scheme === 'first');
}

/**
 * Reads the vocabulary of a parsed tokenizer.json. `vocabSize` is the model's logits length,
 * which may exceed the tokenizer's (padding ids are `''`); ids at or past it are dropped.
 * `keepText` names special tokens that stay spelled (a tool-call format's markers such as
 * Mistral's `[TOOL_CALLS]`, which the grammar must be able to write).
 * Handles BPE / WordPiece / WordLevel (`model.vocab` is `{ token: id }`) and Unigram
 * (`model.vocab` is `[[piece, score], …]`). Throws TypeError when `model.vocab` is neither.
 */
export function readTokenVocabulary(tokenizerJson: unknown, vocabSize: number, keepText: readonly string[] = []): TokenVocabulary {
  if (!isObject(tokenizerJson) || !isObject(tokenizerJson.model)) throw new TypeError('tokenizer.json has no "model" object');
  const tokens: string[] = new Array<string>(vocabSize).fill('');
  const vocab = tokenizerJson.model.vocab;
  if (Array.isArray(vocab)) {
    vocab.forEach((entry: unknown, id) => {
      if (id < vocabSize && Array.isArray(entry) && typeof entry[0] === 'string') tokens[id] = entry[0];
    });
  } else if (isObject(vocab)) {
    for (const [token, id] of Object.entries(vocab)) {
      if (typeof id === 'number' && Number.isInteger(id) && id >= 0 && id < vocabSize) tokens[id] = token;
    }
  } else {
    throw new TypeError('tokenizer.json "model.vocab" is neither an object nor a list');
  }
  const specialTokenText = new Map<number, string>();
  const added = Array.isArray(tokenizerJson.added_tokens) ? tokenizerJson.added_tokens : [];
  for (const entry of added) {
    if (!isObject(entry) || typeof entry.id !== 'number' || typeof entry.content !== 'string') continue;
    if (entry.id < 0 || entry.id >= vocabSize) continue;
    if (entry.special === true && !keepText.includes(entry.content)) {
      specialTokenText.set(entry.id, entry.content);
      tokens[entry.id] = '';
    } else {
      tokens[entry.id] = entry.content; // e.g. Qwen's `<tool_call>`: plain text to the grammar
    }
  }
  return { tokens, kind: detectKind(tokenizerJson), addPrefixSpace: detectPrefixSpace(tokenizerJson), specialTokenText };
}
