/**
 * Where a session's drafter comes from: prompt lookup always, the draft model when the head
 * was given one (`--draft-model`).
 */
import type { SamplingParams } from '../sampling/index.ts';
import type { Drafter, SpeculateMode } from './drafter.ts';
import { ModelDrafter, type DraftModel } from './model-drafter.ts';
import { NgramDrafter, type NgramOptions } from './ngram-drafter.ts';

/** A speculation mode this head cannot serve (no draft model): a 400 naming `speculate` at the edge. */
export class SpeculationUnavailableError extends Error {
  override readonly name = 'SpeculationUnavailableError';
  readonly param = 'speculate';
  constructor(readonly mode: SpeculateMode) {
    super(`speculate '${mode}' needs a draft model, and this server was started without one (meshnet serve --draft-model DIR|HUB_ID); use 'ngram' or 'off'`);
  }
}

export class Drafters {
  constructor(
    private readonly draftModel?: DraftModel,
    private readonly ngram: NgramOptions = {},
  ) {}

  /** Whether sessions may ask for `mode`. */
  has(mode: SpeculateMode): boolean {
    return mode !== 'draft' || this.draftModel !== undefined;
  }

  /** A drafter for one session (undefined for 'off'). Throws SpeculationUnavailableError for a mode `has` refuses. */
  create(mode: SpeculateMode, sessionId: string, params: SamplingParams): Drafter | undefined {
    if (mode === 'off') return undefined;
    if (mode === 'ngram') return new NgramDrafter(this.ngram);
    if (!this.draftModel) throw new SpeculationUnavailableError(mode);
    return new ModelDrafter(this.draftModel, sessionId, params);
  }
}
