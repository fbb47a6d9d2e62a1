/** `--speculate`, `--draft-model` and `--prefill-chunk`, shared by `serve` and `generate`. */
import { SPECULATE_MODES, type SpeculateMode } from '../../core/speculation/drafter.ts';
import { DraftModelError } from '../head/draft-model.ts';
import type { HeadSpeculationOptions } from '../head/head-node.ts';
import { parseChoice, parseInteger, UsageError } from './args.ts';

export const SPECULATION_USAGE = `  --speculate M        off|ngram|draft: draft tokens and verify them in one round trip (default
                       ngram: prompt lookup; draft: the --draft-model; a request's speculate wins)
  --draft-model M      a small model with the same tokenizer (folder or Hub id) that the head runs
                       to draft (makes draft the default)
  --prefill-chunk N    tokens per chunk of a pipelined prefill across hops (default auto; 0 = off)`;

export const SPECULATION_OPTIONS = {
  speculate: { type: 'string' },
  'draft-model': { type: 'string' },
  'prefill-chunk': { type: 'string' },
} as const;

export function parseSpeculation(values: { speculate?: string; 'draft-model'?: string; 'prefill-chunk'?: string }): HeadSpeculationOptions {
  const draftModel = values['draft-model'];
  if (draftModel === '') throw new UsageError('--draft-model is empty: give a folder or a Hub id');
  const mode = values.speculate === undefined ? undefined : parseChoice<SpeculateMode>('speculate', values.speculate, SPECULATE_MODES, 'ngram');
  if (mode === 'draft' && draftModel === undefined) throw new UsageError('--speculate draft needs --draft-model DIR|HUB_ID (a small model with the same tokenizer)');
  const prefillChunk = values['prefill-chunk'] === undefined || values['prefill-chunk'] === 'auto' ? undefined : parseInteger('prefill-chunk', values['prefill-chunk'], 0);
  return { mode, draftModel, prefillChunk };
}

/** A draft model that cannot draft for this model is the command line's mistake. */
export function asUsageError(error: unknown): never {
  if (error instanceof DraftModelError) throw new UsageError(error.message);
  throw error;
}
