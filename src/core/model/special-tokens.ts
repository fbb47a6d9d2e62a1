/**
 * Special tokens of a tokenizer: which ones exist (bos, eos, …), their ids, the strings a
 * chat template sees, and the rule for adding bos/eos when encoding.
 *
 * Why a rule of our own: @huggingface/tokenizers adds special tokens only through the
 * `post_processor` of tokenizer.json and ignores `add_bos_token` / `add_eos_token` in
 * tokenizer_config.json, which transformers honours for Llama-family tokenizers. When the
 * config sets either flag it wins for that token; otherwise the post-processor decides.
 */
import type { Tokenizer } from '@huggingface/tokenizers';
import { TokenizerError } from './tokenizer-error.ts';

/** Named special tokens as text, and every special token's id. */
export interface SpecialTokens {
  readonly bos?: string;
  readonly eos?: string;
  readonly unk?: string;
  readonly pad?: string;
  /** `additional_special_tokens` from tokenizer_config.json. */
  readonly additional: readonly string[];
  /** Text → id of every special token: tokenizer.json `added_tokens` marked special plus the named ones. */
  readonly ids: ReadonlyMap<string, number>;
}

/** A tokenizer's special tokens with the ids of bos and eos resolved. */
export interface TokenizerSpecialTokens extends SpecialTokens {
  /** Id of `bos`, if the config names one. */
  readonly bosId?: number;
  /** Ids that end generation: `eos`'s (empty if none). */
  readonly eosIds: readonly number[];
}

/** `add_bos_token` / `add_eos_token` from the config; undefined leaves it to the post-processor. */
export interface SpecialTokenRule {
  readonly addBos?: boolean;
  readonly addEos?: boolean;
  readonly bosId?: number;
  readonly eosId?: number;
}

export interface ResolvedSpecialTokens {
  readonly tokens: TokenizerSpecialTokens;
  readonly rule: SpecialTokenRule;
  /** `bos_token`, `eos_token`, … as strings, for chat templates (transformers' names). */
  readonly templateVariables: Readonly<Record<string, string | readonly string[]>>;
}

const NAMED = ['bos', 'eos', 'unk', 'pad', 'sep', 'cls', 'mask'] as const;

/**
 * Reads the named tokens from `config` (tokenizer_config.json) and resolves their ids in
 * `inner`. Throws {@link TokenizerError} on `file` when a named token is not in the
 * vocabulary or a flag asks to add a token that is not defined.
 */
export function readSpecialTokens(
  inner: Tokenizer,
  config: Record<string, unknown>,
  file: string,
): ResolvedSpecialTokens {
  const ids = new Map<string, number>();
  for (const [id, added] of inner.get_added_tokens_decoder()) {
    if (added.special) ids.set(added.content, id);
  }
  const templateVariables: Record<string, string | readonly string[]> = {};
  const named: Partial<Record<(typeof NAMED)[number], string>> = {};
  for (const name of NAMED) {
    const text = tokenText(config[`${name}_token`]);
    if (text === undefined) continue;
    const id = inner.token_to_id(text);
    if (id === undefined) {
      throw new TokenizerError(file, `${name}_token "${text}" is not in the vocabulary of tokenizer.json`);
    }
    ids.set(text, id);
    named[name] = text;
    templateVariables[`${name}_token`] = text;
  }
  const additional = asTokenList(config.additional_special_tokens);
  templateVariables.additional_special_tokens = additional;
  for (const text of additional) {
    const id = inner.token_to_id(text);
    if (id !== undefined) ids.set(text, id);
  }

  const bosId = named.bos === undefined ? undefined : ids.get(named.bos);
  const eosId = named.eos === undefined ? undefined : ids.get(named.eos);
  const rule: SpecialTokenRule = {
    addBos: flag(config, 'add_bos_token', bosId, file),
    addEos: flag(config, 'add_eos_token', eosId, file),
    bosId,
    eosId,
  };
  return {
    tokens: { bos: named.bos, eos: named.eos, unk: named.unk, pad: named.pad, additional, ids, bosId, eosIds: endOfTurnIds(config, ids, eosId) },
    rule,
    templateVariables,
  };
}

/**
 * The ids to return for `encode(text, { addSpecialTokens: true })`. `plain` is the encoding
 * without special tokens, `processed` the post-processor's (`prefix + plain + suffix` for
 * the usual TemplateProcessing). A config flag replaces bos in the prefix / eos in the suffix.
 */
export function applySpecialTokenRule(
  rule: SpecialTokenRule,
  plain: readonly number[],
  processed: readonly number[],
): number[] {
  if (rule.addBos === undefined && rule.addEos === undefined) return [...processed];
  let prefix: number[] = [];
  let suffix: number[] = [];
  const at = indexOfRun(processed, plain);
  if (at >= 0) {
    prefix = processed.slice(0, at);
    suffix = processed.slice(at + plain.length);
  }
  // Drop the flagged token from both sides: for empty text the split is ambiguous.
  const { bosId, eosId } = rule;
  if (rule.addBos !== undefined && bosId !== undefined) {
    prefix = prefix.filter((id) => id !== bosId);
    suffix = suffix.filter((id) => id !== bosId);
    if (rule.addBos) prefix.unshift(bosId);
  }
  if (rule.addEos !== undefined && eosId !== undefined) {
    prefix = prefix.filter((id) => id !== eosId);
    suffix = suffix.filter((id) => id !== eosId);
    if (rule.addEos) suffix.push(eosId);
  }
  return [...prefix, ...plain, ...suffix];
}

/** Strings and `{ content }` objects of a token list, as strings. */
export function asTokenList(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((entry: unknown) => {
    const text = tokenText(entry);
    return text === undefined ? [] : [text];
  });
}

/** A token field of tokenizer_config.json: a string, `{ content }`, or null/absent. */
export function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null) {
    const content = (value as { content?: unknown }).content;
    if (typeof content === 'string') return content;
  }
  return undefined;
}

function flag(config: Record<string, unknown>, key: string, id: number | undefined, file: string) {
  const value = config[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw new TokenizerError(file, `${key} must be true or false`);
  if (value && id === undefined) {
    throw new TokenizerError(file, `${key} is true but the token it adds is not defined`);
  }
  return value;
}

/** First index where `run` occurs contiguously in `list` (0 for an empty run), or -1. */
function indexOfRun(list: readonly number[], run: readonly number[]): number {
  for (let start = 0; start + run.length <= list.length; start++) {
    let same = true;
    for (let i = 0; i < run.length && same; i++) same = list[start + i] === run[i];
    if (same) return start;
  }
  return -1;
}

/** Special tokens that close a turn in the chat templates of common models (Gemma, Phi-3, ChatML, Llama 3). */
export const END_OF_TURN_TOKENS = ['<end_of_turn>', '<|end|>', '<|im_end|>', '<|eot_id|>'] as const;

/**
 * The ids that end generation: `eos_token`, then each end-of-turn special token the chat
 * template writes (Phi-3's `<|end|>` while its eos_token is `<|endoftext|>`): a model answering
 * in its template's turns stops where its turn ends.
 */
function endOfTurnIds(config: Record<string, unknown>, ids: ReadonlyMap<string, number>, eosId: number | undefined): number[] {
  const out = eosId === undefined ? [] : [eosId];
  const template = typeof config.chat_template === 'string' ? config.chat_template : '';
  for (const text of END_OF_TURN_TOKENS) {
    const id = ids.get(text);
    if (id !== undefined && template.includes(text) && !out.includes(id)) out.push(id);
  }
  return out;
}
