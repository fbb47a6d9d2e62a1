/**
 * Text ⇄ token ids and chat formatting, built from a Hugging Face `tokenizer.json` and
 * `tokenizer_config.json` given as parsed JSON. Pure: no file or network access, runs the
 * same in Node and browsers (@huggingface/tokenizers and @huggingface/jinja are plain JS).
 */
import { Tokenizer } from '@huggingface/tokenizers';
import {
  type ChatMessage,
  renderChatTemplate,
  selectChatTemplate,
} from './chat-template.ts';
import { applySpecialTokenRule, asTokenList, readSpecialTokens } from './special-tokens.ts';
import type { TokenVocabulary } from '../sampling/grammar/vocabulary.ts';
import { readTokenVocabulary } from './token-vocabulary.ts';
import type { ToolFunction } from './tools/tool-types.ts';
import type { SpecialTokenRule, TokenizerSpecialTokens } from './special-tokens.ts';
import { TokenizerError } from './tokenizer-error.ts';

export { DEFAULT_CHAT_TEMPLATE, type ChatMessage } from './chat-template.ts';
export type { SpecialTokens, TokenizerSpecialTokens } from './special-tokens.ts';
export { TokenizerError } from './tokenizer-error.ts';

/** The chat template a tokenizer renders conversations with. */
export interface ChatTemplate {
  /** The template's Jinja source (the fallback's when there is none). */
  readonly text: string;
  /**
   * True when rendering uses `opts.fallbackTemplate` or {@link DEFAULT_CHAT_TEMPLATE}: neither
   * the tokenizer nor `opts.chatTemplate` provided a template.
   */
  readonly isFallback: boolean;
  /**
   * Renders a conversation to the prompt string, passing `messages`,
   * `add_generation_prompt` and the special tokens as strings (`bos_token`, …). Templates
   * usually emit `bos_token` themselves: encode the result with `addSpecialTokens: false`.
   * Throws {@link TokenizerError} if the template fails. `tools` are passed to the template as
   * its `tools` variable (see `renderChatTemplate`).
   */
  render(messages: readonly ChatMessage[], opts: { addGenerationPrompt: boolean; tools?: readonly ToolFunction[] }): string;
}

/**
 * A loaded tokenizer (five members; the conformance suite is test/suites/text-tokenizer.suite.ts).
 * Immutable; safe to share between sessions.
 */
export interface TextTokenizer {
  /**
   * Text → ids. `addSpecialTokens` (default true, as in transformers) applies the
   * tokenizer's own rule: `add_bos_token` / `add_eos_token` from tokenizer_config.json when
   * present, else the `post_processor` of tokenizer.json. Special-token text inside `text`
   * (e.g. `<s>`) always encodes to its id.
   */
  encode(text: string, opts?: { addSpecialTokens?: boolean }): number[];
  /** Ids → text; `skipSpecialTokens` (default false) drops special tokens. `[]` → `''`. */
  decode(ids: readonly number[], opts?: { skipSpecialTokens?: boolean }): string;
  /**
   * Named special tokens, the id of every special token, `bosId` (`bos_token` of
   * tokenizer_config.json, if it names one) and `eosIds`, the ids that end generation
   * (`eos_token`, then the end-of-turn tokens its chat template writes, e.g. Phi-3's `<|end|>`;
   * empty if none).
   */
  readonly specialTokens: TokenizerSpecialTokens;
  readonly chatTemplate: ChatTemplate;
  /**
   * The vocabulary for a grammar engine (see `readTokenVocabulary`): `vocabSize` is the
   * model's logits length, `keepText` special tokens that stay spelled.
   */
  vocabulary(vocabSize: number, keepText?: readonly string[]): TokenVocabulary;
}

export interface CreateTokenizerOptions {
  /** Chat template text that overrides the tokenizer's own (`chat_template`). */
  readonly chatTemplate?: string;
  /** Name of `chatTemplate`'s origin for error messages; default `chatTemplate option`. */
  readonly chatTemplateSource?: string;
  /** Template used when there is no other; default {@link DEFAULT_CHAT_TEMPLATE}. */
  readonly fallbackTemplate?: string;
}

/**
 * Builds a {@link TextTokenizer}. `tokenizerJson` is the parsed tokenizer.json,
 * `tokenizerConfig` the parsed tokenizer_config.json. Throws {@link TokenizerError} with
 * `file` set to `tokenizer.json`, `tokenizer_config.json` or the template's source when an
 * input is malformed or names tokens the vocabulary lacks.
 */
export function createTokenizer(
  tokenizerJson: unknown,
  tokenizerConfig: unknown,
  opts: CreateTokenizerOptions = {},
): TextTokenizer {
  const json = asObject(tokenizerJson, 'tokenizer.json');
  const config = asObject(tokenizerConfig, 'tokenizer_config.json');
  if (typeof json.model !== 'object' || json.model === null) {
    throw new TokenizerError('tokenizer.json', 'missing the "model" object');
  }
  const inner = buildInner(json, config);
  const special = readSpecialTokens(inner, config, 'tokenizer_config.json');
  const rule: SpecialTokenRule = special.rule;
  const chat = selectChatTemplate({
    override:
      opts.chatTemplate === undefined
        ? undefined
        : { text: opts.chatTemplate, source: opts.chatTemplateSource ?? 'chatTemplate option' },
    configValue: config.chat_template,
    configSource: 'tokenizer_config.json',
    fallback: opts.fallbackTemplate,
  });

  return {
    specialTokens: special.tokens,
    chatTemplate: {
      text: chat.text,
      isFallback: chat.isFallback,
      render(messages, templateOpts) {
        return renderChatTemplate(chat, messages, templateOpts.addGenerationPrompt, special.templateVariables, templateOpts.tools);
      },
    },
    vocabulary(vocabSize, keepText) {
      return readTokenVocabulary(json, vocabSize, keepText);
    },
    encode(text, encodeOpts) {
      const addSpecialTokens = encodeOpts?.addSpecialTokens ?? true;
      const processed = inner.encode(text, { add_special_tokens: addSpecialTokens }).ids;
      if (!addSpecialTokens || (rule.addBos === undefined && rule.addEos === undefined)) {
        return processed;
      }
      const plain = inner.encode(text, { add_special_tokens: false }).ids;
      return applySpecialTokenRule(rule, plain, processed);
    },
    decode(ids, decodeOpts) {
      if (ids.length === 0) return '';
      return inner.decode([...ids], { skip_special_tokens: decodeOpts?.skipSpecialTokens ?? false });
    },
  };
}

function buildInner(json: Record<string, unknown>, config: Record<string, unknown>): Tokenizer {
  // @huggingface/tokenizers requires these keys to exist; older files may omit null ones.
  const complete = {
    normalizer: null,
    pre_tokenizer: null,
    post_processor: null,
    decoder: null,
    added_tokens: [],
    ...json,
  };
  const innerConfig = {
    ...config,
    // It treats these as strings; configs may store `{ content }` objects.
    additional_special_tokens: asTokenList(config.additional_special_tokens),
    // transformers now defaults this to false; the library's default (true) rewrites
    // " ." to "." and makes streamed text depend on what follows.
    clean_up_tokenization_spaces: config.clean_up_tokenization_spaces ?? false,
  };
  try {
    return new Tokenizer(complete, innerConfig);
  } catch (cause) {
    const message = cause instanceof Error ? cause.message : String(cause);
    throw new TokenizerError('tokenizer.json', `cannot build the tokenizer: ${message}`, { cause });
  }
}

function asObject(value: unknown, file: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TokenizerError(file, 'expected a JSON object at the top level');
  }
  return value as Record<string, unknown>;
}
