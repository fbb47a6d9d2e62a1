/**
 * A minimal byte-level BPE trainer (GPT-2 style) for the demo tokenizer. Pure and
 * deterministic: the same corpus and limits always give the same merges.
 *
 * Every byte is a token of its own (shown through GPT-2's printable byte table), so any
 * text encodes and decodes back exactly, whatever merges were learned.
 */

/** GPT-2's reversible byte → printable character table (index = byte value). */
export function byteToUnicode(): string[] {
  const printable = new Set<number>();
  for (let b = 0x21; b <= 0x7e; b++) printable.add(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.add(b);
  for (let b = 0xae; b <= 0xff; b++) printable.add(b);
  const table: string[] = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) table[b] = printable.has(b) ? String.fromCharCode(b) : String.fromCharCode(256 + extra++);
  return table;
}

/** The split GPT-2's ByteLevel pre-tokenizer applies before merging (`use_regex: true`). */
const PRE_TOKENIZE = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

export interface ByteLevelBpe {
  /** Token string → id: the 256 byte tokens (ids 0..255, in byte order), then merged tokens. */
  readonly vocab: Map<string, number>;
  /** Merges in rank order, each `"left right"` (byte-level strings never contain a space). */
  readonly merges: string[];
}

export interface TrainOptions {
  /** Stop when the vocabulary (bytes + merged tokens) reaches this size. */
  readonly maxVocab: number;
  /** Only merge pairs seen at least this often (default 2). */
  readonly minCount?: number;
}

/**
 * Learns merges from `corpus`: repeatedly merges the most frequent adjacent pair inside
 * pre-tokenized words; ties go to the pair that sorts first, so the result is stable.
 */
export function trainByteLevelBpe(corpus: string, options: TrainOptions): ByteLevelBpe {
  const table = byteToUnicode();
  const encoder = new TextEncoder();
  const wordCounts = new Map<string, number>();
  for (const match of corpus.matchAll(PRE_TOKENIZE)) {
    const word = Array.from(encoder.encode(match[0]), (b) => table[b]).join('\u0000');
    wordCounts.set(word, (wordCounts.get(word) ?? 0) + 1);
  }
  // Each distinct word as its current symbol list, with how often it occurs.
  const words = [...wordCounts.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([word, count]) => ({ symbols: word.split('\u0000'), count }));

  const vocab = new Map<string, number>(table.map((char, byte) => [char, byte]));
  const merges: string[] = [];
  const minCount = options.minCount ?? 2;
  while (vocab.size < options.maxVocab) {
    const pairs = new Map<string, number>();
    for (const { symbols, count } of words) {
      for (let i = 0; i + 1 < symbols.length; i++) {
        const key = `${symbols[i]} ${symbols[i + 1]}`;
        pairs.set(key, (pairs.get(key) ?? 0) + count);
      }
    }
    let best: string | undefined;
    let bestCount = 0;
    for (const [key, count] of pairs) {
      if (count > bestCount || (count === bestCount && best !== undefined && key < best)) {
        best = key;
        bestCount = count;
      }
    }
    if (best === undefined || bestCount < minCount) break;
    const [left, right] = best.split(' ') as [string, string];
    const merged = left + right;
    merges.push(best);
    if (!vocab.has(merged)) vocab.set(merged, vocab.size);
    for (const word of words) word.symbols = mergePair(word.symbols, left, right, merged);
  }
  return { vocab, merges };
}

function mergePair(symbols: string[], left: string, right: string, merged: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < symbols.length; i++) {
    if (i + 1 < symbols.length && symbols[i] === left && symbols[i + 1] === right) {
      out.push(merged);
      i++;
    } else {
      out.push(symbols[i]!);
    }
  }
  return out;
}
