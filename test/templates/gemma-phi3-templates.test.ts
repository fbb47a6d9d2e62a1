/**
 * The real Gemma 3 and Phi-3 chat templates (test/fixtures/tokenizers/) render a multi-turn
 * conversation with a system message, and encode, as Hugging Face does. The expected text is
 * written from each template's semantics; the expected ids are looked up piece by piece in
 * tokenizer.json's own vocabulary (not produced by our encoder), following Hugging Face's
 * rules for each tokenizer:
 * - Gemma 3: the template writes `<bos>`, folds the system message into the first user turn
 *   (followed by "\n\n"), names the assistant `model`; "\n" and "\n\n" are added tokens; no
 *   normalizer prefix ("▁" replaces spaces only).
 * - Phi-3: `<|system|>`, `<|user|>`, `<|assistant|>` and `<|end|>` have `rstrip`, so the "\n"
 *   after each is absorbed; the normalizer prepends "▁" to each text segment.
 * End-of-turn tokens are stops: `<end_of_turn>` (Gemma's eos) and Phi-3's `<|end|>` beside
 * its eos `<|endoftext|>`.
 */
import { mkdtemp, rm, writeFile, copyFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TextTokenizer } from '../../src/core/model/tokenizer.ts';
import { generationLimits } from '../../src/core/model/generation-limits.ts';
import { loadTokenizer } from '../../src/node/tokenizer-files.ts';

const TOKENIZERS = path.resolve(import.meta.dirname, '../fixtures/tokenizers');
const CONVERSATION = [
  { role: 'system', content: 'You are helpful.' },
  { role: 'user', content: 'Hi there' },
  { role: 'assistant', content: 'Hello! How can I help?' },
  { role: 'user', content: 'Name a color.' },
] as const;

/** Ids of `pieces` in tokenizer.json's own vocabulary and added tokens; a missing piece fails the test. */
function lookup(tokenizerJson: { model: { vocab: Record<string, number> }; added_tokens: { content: string; id: number }[] }) {
  const added = new Map(tokenizerJson.added_tokens.map((t) => [t.content, t.id]));
  return (...pieces: string[]) =>
    pieces.map((p) => {
      const id = added.get(p) ?? tokenizerJson.model.vocab[p];
      if (id === undefined) throw new Error(`piece ${JSON.stringify(p)} is not in the vocabulary`);
      return id;
    });
}

let gemmaDir: string;
let gemma: TextTokenizer;
let gemmaJson: Parameters<typeof lookup>[0];
let phi3: TextTokenizer;
beforeAll(async () => {
  gemmaDir = await mkdtemp(path.join(os.tmpdir(), 'meshnet-gemma-tok-'));
  const unzipped = gunzipSync(readFileSync(path.join(TOKENIZERS, 'gemma3/tokenizer.json.gz')));
  await writeFile(path.join(gemmaDir, 'tokenizer.json'), unzipped);
  await copyFile(path.join(TOKENIZERS, 'gemma3/tokenizer_config.json'), path.join(gemmaDir, 'tokenizer_config.json'));
  gemmaJson = JSON.parse(unzipped.toString('utf8'));
  gemma = await loadTokenizer(gemmaDir);
  phi3 = await loadTokenizer(path.join(TOKENIZERS, 'phi-3-mini-4k-instruct'));
});
afterAll(() => rm(gemmaDir, { recursive: true, force: true }));

describe('Gemma 3 chat template', () => {
  it('renders and encodes a system + multi-turn conversation as Hugging Face does', () => {
    const text = gemma.chatTemplate.render(CONVERSATION, { addGenerationPrompt: true });
    expect(gemma.chatTemplate.isFallback).toBe(false);
    expect(text).toBe(
      '<bos><start_of_turn>user\nYou are helpful.\n\nHi there<end_of_turn>\n<start_of_turn>model\nHello! How can I help?<end_of_turn>\n' +
        '<start_of_turn>user\nName a color.<end_of_turn>\n<start_of_turn>model\n',
    );
    const ids = lookup(gemmaJson);
    const turn = (role: string, ...pieces: string[]) => [...ids('<start_of_turn>', role, '\n'), ...ids(...pieces), ...ids('<end_of_turn>', '\n')];
    const expected = [
      ...ids('<bos>'),
      ...turn('user', 'You', '▁are', '▁helpful', '.', '\n\n', 'Hi', '▁there'),
      ...turn('model', 'Hello', '!', '▁How', '▁can', '▁I', '▁help', '?'),
      ...turn('user', 'Name', '▁a', '▁color', '.'),
      ...ids('<start_of_turn>', 'model', '\n'),
    ];
    // The template wrote <bos>: encode without adding another.
    expect(gemma.encode(text, { addSpecialTokens: false })).toEqual(expected);
    expect(expected.slice(0, 4)).toEqual([2, 105, 2364, 107]); // the fixture README's ids
  });

  it('ends generation at <end_of_turn>', () => {
    expect(gemma.specialTokens.eosIds).toContain(106);
    expect(generationLimits({ maxPositionEmbeddings: 32768, eosTokenIds: [1] }, gemma).stopTokenIds).toEqual([1, 106]);
  });
});

describe('Phi-3 chat template', () => {
  it('renders and encodes a system + multi-turn conversation as Hugging Face does', () => {
    const text = phi3.chatTemplate.render(CONVERSATION, { addGenerationPrompt: true });
    expect(text).toBe('<|system|>\nYou are helpful.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\nHello! How can I help?<|end|>\n<|user|>\nName a color.<|end|>\n<|assistant|>\n');
    const ids = lookup(JSON.parse(readFileSync(path.join(TOKENIZERS, 'phi-3-mini-4k-instruct/tokenizer.json'), 'utf8')));
    const expected = [
      ...ids('<|system|>', '▁You', '▁are', '▁helpful', '.', '<|end|>'),
      ...ids('<|user|>', '▁Hi', '▁there', '<|end|>'),
      ...ids('<|assistant|>', '▁Hello', '!', '▁How', '▁can', '▁I', '▁help', '?', '<|end|>'),
      ...ids('<|user|>', '▁Name', '▁a', '▁color', '.', '<|end|>'),
      ...ids('<|assistant|>'),
    ];
    expect(phi3.encode(text, { addSpecialTokens: false })).toEqual(expected);
    expect(expected.slice(0, 2)).toEqual([32006, 887]);
  });

  it('ends generation at <|end|> as well as <|endoftext|>', () => {
    expect(phi3.specialTokens.eosIds).toEqual([32000, 32007]);
  });
});
