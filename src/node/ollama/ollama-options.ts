/**
 * Ollama's `options` object → our sampling. Honoured: `temperature`, `top_p`, `top_k`,
 * `min_p`, `seed`, `num_predict` (-1 and -2 mean "no limit": the model's default, cut to the
 * context), `stop`, `repeat_penalty`, `presence_penalty`, `frequency_penalty`.
 *
 * Our repetition penalty looks at the whole context, which is Ollama's `repeat_last_n: -1`;
 * `repeat_last_n: 0` turns it off; any other window would change the answer and is refused.
 * Sampling methods we do not have (`mirostat`, `typical_p`, `tfs_z`) are refused unless they
 * hold their "off" value. Options that only tune Ollama's runner (`num_ctx`, `num_batch`,
 * `num_gpu`, `main_gpu`, `num_thread`, `use_mmap`, `use_mlock`, `numa`, `low_vram`, `f16_kv`,
 * `vocab_only`, `logits_all`, `embedding_only`, `num_keep`, `penalize_newline`,
 * `mirostat_tau`, `mirostat_eta`) are accepted and ignored; an unknown option is refused.
 * Errors name the field as `options.NAME`.
 */
import type { SamplingParams } from '../../core/sampling/params.ts';
import { MAX_STOP_STRINGS } from '../openai/requests.ts';
import { BodyFields, invalidValue, isRecord, shown, stringValue, typeError, unsupported } from '../openai/request-fields.ts';

/** Runner and deprecated options Ollama takes that do not change which tokens are sampled. */
const IGNORED = new Set([
  'num_ctx', 'num_batch', 'num_gpu', 'main_gpu', 'num_thread', 'use_mmap', 'use_mlock', 'numa', 'low_vram', 'f16_kv',
  'vocab_only', 'logits_all', 'embedding_only', 'num_keep', 'penalize_newline', 'mirostat_tau', 'mirostat_eta',
]);
const HONOURED = new Set(['temperature', 'top_p', 'top_k', 'min_p', 'seed', 'num_predict', 'stop', 'repeat_penalty', 'repeat_last_n', 'presence_penalty', 'frequency_penalty']);
/** Sampling methods we do not implement, with the value that means "off". */
const OFF_ONLY: Readonly<Record<string, number>> = { mirostat: 0, typical_p: 1, tfs_z: 1 };

export interface OllamaSampling {
  readonly sampling: Partial<SamplingParams>;
  /** `num_predict` when it is a limit. */
  readonly maxTokens?: number;
  readonly stopStrings: string[];
}

/** Parses `options` (absent or null: no options). Throws ApiError 400 naming `options.NAME`. */
export function parseOllamaOptions(value: unknown): OllamaSampling {
  if (value === undefined || value === null) return { sampling: {}, stopStrings: [] };
  if (!isRecord(value)) throw typeError('options', 'an object', value);
  const prefixed: Record<string, unknown> = {};
  for (const [name, setting] of Object.entries(value)) {
    if (!HONOURED.has(name) && !IGNORED.has(name) && !Object.hasOwn(OFF_ONLY, name)) {
      throw unsupported(`options.${shown(name)}`, 'is not an option this server knows.');
    }
    prefixed[`options.${name}`] = setting;
  }
  const fields = new BodyFields(prefixed);
  for (const [name, off] of Object.entries(OFF_ONLY)) {
    const setting = fields.number(`options.${name}`);
    if (setting !== undefined && setting !== off) throw unsupported(`options.${name}`, `is not supported: this server has no ${name} sampling (send ${off} or leave it out).`);
  }
  const out: { -readonly [K in keyof SamplingParams]?: SamplingParams[K] } = {};
  const set = <K extends keyof SamplingParams>(key: K, setting: SamplingParams[K] | undefined) => {
    if (setting !== undefined) out[key] = setting;
  };
  set('temperature', fields.number('options.temperature', { min: 0, max: 2 }));
  set('topP', fields.number('options.top_p', { min: 0, minExclusive: true, max: 1 }));
  set('topK', fields.integer('options.top_k', { min: 0 }));
  set('minP', fields.number('options.min_p', { min: 0, max: 1 }));
  set('seed', fields.integer('options.seed'));
  set('presencePenalty', fields.number('options.presence_penalty', { min: -2, max: 2 }));
  set('frequencyPenalty', fields.number('options.frequency_penalty', { min: -2, max: 2 }));
  set('repetitionPenalty', fields.number('options.repeat_penalty', { min: 0, minExclusive: true }));
  const window = fields.integer('options.repeat_last_n', { min: -1 });
  if (window === 0) out.repetitionPenalty = 1;
  else if (window !== undefined && window !== -1) {
    throw unsupported('options.repeat_last_n', 'is not supported: this server applies repeat_penalty over the whole context (send -1, or 0 to turn it off).');
  }
  const predict = fields.integer('options.num_predict', { min: -2 });
  if (predict === 0) throw invalidValue('options.num_predict', 'expected at least 1 token, or -1 for no limit.');
  return { sampling: out, ...(predict !== undefined && predict > 0 ? { maxTokens: predict } : {}), stopStrings: parseStop(fields.get('options.stop')) };
}

function parseStop(value: unknown): string[] {
  if (value === undefined) return [];
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list)) throw typeError('options.stop', 'an array of strings', value);
  if (list.length > MAX_STOP_STRINGS) throw invalidValue('options.stop', `at most ${MAX_STOP_STRINGS} stop strings, but got ${list.length}.`);
  return list.map((s: unknown, i) => {
    const text = stringValue(`options.stop[${i}]`, s);
    if (text === '') throw invalidValue(`options.stop[${i}]`, 'stop strings must not be empty.');
    return text;
  });
}
