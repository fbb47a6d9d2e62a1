/** The real Qwen2.5-Instruct tokenizer (151,936 logits) for grammar and tool tests. */
import { readFileSync } from 'node:fs';
import { createTokenizer, type TextTokenizer } from '../../src/core/model/tokenizer.ts';

export const QWEN_DIR = new URL('../fixtures/tokenizers/qwen2.5-instruct/', import.meta.url).pathname;
export const QWEN3_CONFIG = new URL('../fixtures/tokenizers/qwen3/tokenizer_config.json', import.meta.url).pathname;
export const PHI3_DIR = new URL('../fixtures/tokenizers/phi-3-mini-4k-instruct/', import.meta.url).pathname;
export const QWEN_VOCAB = 151_936;
export const QWEN_EOS = 151_645; // <|im_end|>

const readJson = (path: string): unknown => JSON.parse(readFileSync(path, 'utf8'));

let qwen: { json: unknown; tokenizer: TextTokenizer } | undefined;

/** Parsed once per test file (7 MB of JSON). */
export function qwenTokenizer(): { json: unknown; tokenizer: TextTokenizer } {
  qwen ??= (() => {
    const json = readJson(`${QWEN_DIR}tokenizer.json`);
    return { json, tokenizer: createTokenizer(json, readJson(`${QWEN_DIR}tokenizer_config.json`)) };
  })();
  return qwen;
}

export function tokenizerFrom(dir: string, configPath = `${dir}tokenizer_config.json`): TextTokenizer {
  return createTokenizer(readJson(`${dir}tokenizer.json`), readJson(configPath));
}
