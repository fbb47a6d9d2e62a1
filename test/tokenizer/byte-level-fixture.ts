/**
 * A tiny byte-level BPE tokenizer.json (GPT-2 style) for tests: one token per byte, a few
 * merges, and `<|endoftext|>` as a special token. With no merges across UTF-8 bytes, a
 * multi-byte character such as "é" (2 bytes) or "日" (3 bytes) spans several tokens.
 */

/** GPT-2's reversible byte → printable character table. */
export function bytesToUnicode(): string[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const table: string[] = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    table[b] = printable.includes(b) ? String.fromCharCode(b) : String.fromCharCode(256 + extra++);
  }
  return table;
}

export const END_OF_TEXT_ID = 259;

export function byteLevelTokenizerJson(): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  bytesToUnicode().forEach((char, byte) => (vocab[char] = byte));
  vocab['he'] = 256;
  vocab['ll'] = 257;
  vocab['Ġw'] = 258;
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [
      { id: END_OF_TEXT_ID, content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
    ],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      vocab: { ...vocab, '<|endoftext|>': END_OF_TEXT_ID },
      merges: ['h e', 'l l', 'Ġ w'],
    },
  };
}

export const BYTE_LEVEL_CONFIG = {
  bos_token: '<|endoftext|>',
  eos_token: '<|endoftext|>',
  unk_token: '<|endoftext|>',
  tokenizer_class: 'GPT2Tokenizer',
};
