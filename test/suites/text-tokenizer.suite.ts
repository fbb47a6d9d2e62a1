/**
 * The TextTokenizer conformance suite (src/core/model/tokenizer.ts states the contract).
 * Every tokenizer runs it (test/tokenizer/text-tokenizers.test.ts): createTokenizer over the
 * fixtures' tokenizer files — a word-level stand-in and a SentencePiece model (both on the
 * fallback template), byte-level BPE with tools in its template, and a SentencePiece
 * vocabulary with its own template.
 */
import { END_OF_TURN_TOKENS } from '../../src/core/model/special-tokens.ts';
import { describe, expect, it } from 'vitest';
import type { TextTokenizer } from '../../src/core/model/tokenizer.ts';

export interface TextTokenizerFixture {
  readonly tokenizer: TextTokenizer;
  /** Text this vocabulary spells and decodes back exactly. */
  readonly sample: string;
  /** The model's logits length (at least the tokenizer's ids). */
  readonly vocabSize: number;
  /** Whether the tokenizer files bring a chat template of their own. */
  readonly ownTemplate: boolean;
}

export function textTokenizerSuite(name: string, factory: () => Promise<TextTokenizerFixture>): void {
  describe(`TextTokenizer conformance: ${name}`, () => {
    it('text round-trips through encode and decode; no ids decode to no text', async () => {
      const { tokenizer, sample } = await factory();
      const ids = tokenizer.encode(sample, { addSpecialTokens: false });
      expect(ids.length).toBeGreaterThan(0);
      expect(ids.every((id) => Number.isInteger(id) && id >= 0)).toBe(true);
      expect(tokenizer.decode(ids)).toBe(sample);
      expect(tokenizer.decode([])).toBe('');
    });

    it('the default adds only special tokens around the plain encoding', async () => {
      const { tokenizer, sample } = await factory();
      const plain = tokenizer.encode(sample, { addSpecialTokens: false });
      const full = tokenizer.encode(sample);
      expect(tokenizer.encode(sample, { addSpecialTokens: true })).toEqual(full);
      const at = full.findIndex((_, i) => plain.every((id, j) => full[i + j] === id));
      expect(at, 'the plain ids inside the default encoding').toBeGreaterThanOrEqual(0);
      const specials = new Set(tokenizer.specialTokens.ids.values());
      expect([...full.slice(0, at), ...full.slice(at + plain.length)].every((id) => specials.has(id))).toBe(true);
    });

    it('bos and eos: named, their ids resolved, their text encodes to their id', async () => {
      const { tokenizer } = await factory();
      const { bos, eos, ids, bosId, eosIds } = tokenizer.specialTokens;
      expect(bosId).toBe(bos === undefined ? undefined : ids.get(bos));
      // eos_token first, then the end-of-turn tokens the chat template writes (Phi-3's <|end|>).
      const named = eos === undefined ? 0 : 1;
      expect(eosIds.slice(0, named)).toEqual(eos === undefined ? [] : [ids.get(eos)]);
      for (const id of eosIds.slice(named)) expect(END_OF_TURN_TOKENS.some((t) => ids.get(t) === id)).toBe(true);
      for (const text of [bos, eos]) if (text !== undefined) expect(tokenizer.encode(text, { addSpecialTokens: false })).toEqual([ids.get(text)]);
    });

    it('special tokens decode unless skipped', async () => {
      const { tokenizer, sample } = await factory();
      const plain = tokenizer.encode(sample, { addSpecialTokens: false });
      const [eos] = tokenizer.specialTokens.eosIds;
      if (eos === undefined) throw new Error('every fixture names an eos token');
      expect(tokenizer.decode([...plain, eos], { skipSpecialTokens: true })).toBe(sample);
      const spelled = tokenizer.decode([...plain, eos]);
      expect(spelled.startsWith(sample) && spelled.trimEnd().endsWith(tokenizer.specialTokens.eos!)).toBe(true);
    });

    it('its chat template renders a conversation, with and without the generation prompt', async () => {
      const { tokenizer, sample, ownTemplate } = await factory();
      expect(tokenizer.chatTemplate.isFallback).toBe(!ownTemplate);
      expect(tokenizer.chatTemplate.text.length).toBeGreaterThan(0);
      const messages = [{ role: 'user' as const, content: sample }];
      const open = tokenizer.chatTemplate.render(messages, { addGenerationPrompt: true });
      const closed = tokenizer.chatTemplate.render(messages, { addGenerationPrompt: false });
      for (const prompt of [open, closed]) expect(prompt).toContain(sample);
      expect(open).not.toBe(closed);
    });

    it('its grammar vocabulary has one entry per logit, specials blank and listed', async () => {
      const { tokenizer, vocabSize } = await factory();
      const vocabulary = tokenizer.vocabulary(vocabSize);
      expect(vocabulary.tokens.length).toBe(vocabSize);
      for (const [id] of vocabulary.specialTokenText) expect(vocabulary.tokens[id]).toBe('');
      const [eos] = tokenizer.specialTokens.eosIds;
      expect(vocabulary.specialTokenText.has(eos!)).toBe(true);
    });
  });
}
