/**
 * The demo model's tokenizer files: a byte-level BPE learned from DEMO_CORPUS, plus the
 * chat special tokens, a chat template and bos/eos. Pure; the same inputs always give the
 * same JSON text.
 */
import { trainByteLevelBpe } from './byte-level-bpe.ts';
import { DEMO_CORPUS } from './demo-corpus.ts';

export const BEGIN_OF_TEXT = '<|begin_of_text|>';
export const END_OF_TEXT = '<|end_of_text|>';
export const END_OF_TURN = '<|end|>';
const ROLE_TOKENS = ['<|system|>', '<|user|>', '<|assistant|>'] as const;
const SPECIAL_TOKENS = [BEGIN_OF_TEXT, END_OF_TEXT, '<|user|>', '<|assistant|>', '<|system|>', END_OF_TURN];

/** Byte tokens + merged tokens, before the special tokens (which follow them). */
const BPE_VOCAB_LIMIT = 1024 - SPECIAL_TOKENS.length;

/**
 * ChatML-like: `<|role|>\ncontent<|end|>\n` per turn after the bos token; the generation
 * prompt is `<|assistant|>\n`. It emits bos itself: encode its output without special tokens.
 */
export const DEMO_CHAT_TEMPLATE =
  '{{ bos_token }}' +
  '{% for message in messages %}' +
  "{% if message['role'] not in ['system', 'user', 'assistant'] %}" +
  "{{ raise_exception('the demo chat template supports the roles system, user and assistant, not ' + message['role']) }}" +
  '{% endif %}' +
  "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}" +
  '{% endfor %}' +
  "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

export interface DemoTokenizer {
  /** tokenizer.json and tokenizer_config.json contents. */
  readonly files: Map<string, string>;
  /** Every token id is below this: the model's `vocab_size`. */
  readonly vocabSize: number;
  readonly bosTokenId: number;
  /** `<|end_of_text|>` then `<|end|>`: both end generation. */
  readonly eosTokenIds: number[];
}

export function buildDemoTokenizer(): DemoTokenizer {
  const bpe = trainByteLevelBpe(DEMO_CORPUS, { maxVocab: BPE_VOCAB_LIMIT, minCount: 1 });
  const specialIds = new Map(SPECIAL_TOKENS.map((token, i) => [token, bpe.vocab.size + i]));
  const id = (token: string): number => specialIds.get(token)!;
  const bos = id(BEGIN_OF_TEXT);

  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIAL_TOKENS.map((content) => ({
      id: id(content),
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    // Like Llama 3: the post-processor adds bos when special tokens are requested.
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: BEGIN_OF_TEXT, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [
        { SpecialToken: { id: BEGIN_OF_TEXT, type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: BEGIN_OF_TEXT, type_id: 1 } },
        { Sequence: { id: 'B', type_id: 1 } },
      ],
      special_tokens: { [BEGIN_OF_TEXT]: { id: BEGIN_OF_TEXT, ids: [bos], tokens: [BEGIN_OF_TEXT] } },
    },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: Object.fromEntries([...bpe.vocab, ...specialIds]),
      merges: bpe.merges,
    },
  };
  const tokenizerConfig = {
    tokenizer_class: 'PreTrainedTokenizerFast',
    bos_token: BEGIN_OF_TEXT,
    eos_token: END_OF_TURN,
    pad_token: END_OF_TEXT,
    additional_special_tokens: [...ROLE_TOKENS],
    clean_up_tokenization_spaces: false,
    model_max_length: 2048,
    chat_template: DEMO_CHAT_TEMPLATE,
  };
  return {
    files: new Map([
      ['tokenizer.json', `${JSON.stringify(tokenizer)}\n`],
      ['tokenizer_config.json', `${JSON.stringify(tokenizerConfig, null, 2)}\n`],
    ]),
    vocabSize: bpe.vocab.size + SPECIAL_TOKENS.length,
    bosTokenId: bos,
    eosTokenIds: [id(END_OF_TEXT), id(END_OF_TURN)],
  };
}
