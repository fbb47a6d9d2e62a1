/**
 * Every TextTokenizer runs the conformance suite (test/suites/text-tokenizer.suite.ts):
 * createTokenizer, loaded from the fixtures' files as the head loads a checkpoint's.
 */
import path from 'node:path';
import { loadTokenizer } from '../../src/node/tokenizer-files.ts';
import { AIDREAMS_DIR, STORIES_DIR } from '../engine/harness.ts';
import { textTokenizerSuite } from '../suites/text-tokenizer.suite.ts';

const TOKENIZERS = path.resolve(import.meta.dirname, '../fixtures/tokenizers');

textTokenizerSuite('stories260k (word-level stand-in, no template)', async () => ({
  tokenizer: await loadTokenizer(STORIES_DIR),
  sample: 't461 t401 t3',
  vocabSize: 512,
  ownTemplate: false,
}));
textTokenizerSuite('aidreams260k (SentencePiece, no template)', async () => ({
  tokenizer: await loadTokenizer(AIDREAMS_DIR),
  sample: 'Once upon a time, there was a little dog.',
  vocabSize: 512,
  ownTemplate: false,
}));
textTokenizerSuite('Qwen2.5-Instruct (byte-level BPE, tools in the template)', async () => ({
  tokenizer: await loadTokenizer(path.join(TOKENIZERS, 'qwen2.5-instruct')),
  sample: 'Hello, world! Ünïcode ✓ 123',
  vocabSize: 151936,
  ownTemplate: true,
}));
textTokenizerSuite('Phi-3-mini (SentencePiece, its own template)', async () => ({
  tokenizer: await loadTokenizer(path.join(TOKENIZERS, 'phi-3-mini-4k-instruct')),
  sample: 'Hello, world!',
  vocabSize: 32064,
  ownTemplate: true,
}));
