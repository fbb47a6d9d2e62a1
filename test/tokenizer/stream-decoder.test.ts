import { describe, expect, it } from 'vitest';
import { StreamDecoder } from '../../src/core/model/stream-decoder.ts';
import { createTokenizer } from '../../src/core/model/tokenizer.ts';
import { BYTE_LEVEL_CONFIG, END_OF_TEXT_ID, byteLevelTokenizerJson } from './byte-level-fixture.ts';

const tokenizer = createTokenizer(byteLevelTokenizerJson(), BYTE_LEVEL_CONFIG);
const TEXT = 'hello wörld, café 日本語!';

function stream(ids: readonly number[], decoder = new StreamDecoder(tokenizer)): string[] {
  const deltas = ids.map((id) => decoder.push(id));
  deltas.push(decoder.flush());
  return deltas;
}

describe('byte-level fixture', () => {
  it('round-trips text and splits multi-byte characters across tokens', () => {
    const ids = tokenizer.encode(TEXT);
    expect(tokenizer.decode(ids)).toBe(TEXT);
    expect(tokenizer.encode('日', { addSpecialTokens: false })).toEqual([0xe6, 0x97, 0xa5]);
    expect(tokenizer.encode('hello', { addSpecialTokens: false })).toEqual([256, 257, 111]);
    // Alone, a partial character decodes to U+FFFD: what StreamDecoder must hold back.
    expect(tokenizer.decode([0xe6, 0x97])).toBe('\uFFFD');
  });
});

describe('StreamDecoder', () => {
  it('emits deltas whose concatenation is the full decode, never U+FFFD', () => {
    const ids = tokenizer.encode(TEXT);
    const deltas = stream(ids);
    for (const delta of deltas) expect(delta).not.toContain('\uFFFD');
    expect(deltas.join('')).toBe(tokenizer.decode(ids));
    expect(deltas.join('')).toBe(TEXT);
    // The first byte of "日" completes nothing; the third emits the whole character.
    const start = ids.indexOf(0xe6);
    expect(deltas.slice(start, start + 3)).toEqual(['', '', '日']);
  });

  it('skips special tokens by default and can keep them', () => {
    const ids = [...tokenizer.encode('hé'), END_OF_TEXT_ID];
    expect(stream(ids).join('')).toBe('hé');
    expect(stream(ids, new StreamDecoder(tokenizer, { skipSpecialTokens: false })).join('')).toBe(
      'hé<|endoftext|>',
    );
  });

  it('flush releases an incomplete trailing character once', () => {
    const decoder = new StreamDecoder(tokenizer);
    expect(decoder.push(0x61)).toBe('a');
    expect(decoder.push(0xe6)).toBe('');
    expect(decoder.flush()).toBe('\uFFFD');
    expect(decoder.flush()).toBe('');
    expect(decoder.ids).toEqual([0x61, 0xe6]);
  });

  it('matches the full decode on a word-level tokenizer that joins tokens with spaces', () => {
    const wordLevel = createTokenizer(
      {
        added_tokens: [],
        model: { type: 'WordLevel', vocab: { '<unk>': 0, a: 1, b: 2, '.': 3 }, unk_token: '<unk>' },
        pre_tokenizer: { type: 'WhitespaceSplit' },
      },
      {},
    );
    const ids = [1, 2, 3, 1];
    expect(stream(ids, new StreamDecoder(wordLevel)).join('')).toBe(wordLevel.decode(ids));
    expect(wordLevel.decode(ids)).toBe('a b . a');
  });
});
