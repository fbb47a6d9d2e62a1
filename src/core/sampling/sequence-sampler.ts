/**
 * Where a sequence's tokens are sampled: the seam between a Route Session and its Sampler.
 * By default the Sampler runs where the session does (`localSampler`); the Node head hands
 * sampling over 151,936-token vocabularies to a worker thread (src/node/sampler-worker.ts), so
 * its event loop is not held by one pass of exp() over the vocabulary per token per stream.
 * Either way it is the same Sampler code with the same state, so the same seed gives the same
 * tokens.
 */
import type { TokenMask } from './constraint.ts';
import type { SamplingParams } from './params.ts';
import type { TokenHistory } from './penalties.ts';
import { Sampler, type SampledToken, type VerifiedSample } from './sampler.ts';
import type { DraftToken } from './speculative.ts';

/** One sequence's sampler (Sampler's `sample` / `verify`, possibly answered elsewhere). */
export interface SequenceSampler {
  sample(logits: Float32Array, history: TokenHistory, mask?: TokenMask): SampledToken | Promise<SampledToken>;
  verify(logits: Float32Array, history: TokenHistory, draft: DraftToken, mask?: TokenMask): VerifiedSample | Promise<VerifiedSample>;
  /** Frees the sequence's state (idempotent); no call after it. */
  dispose(): void;
}

/** Makes a sequence's sampler; throws SamplingParamError at once for invalid `params`. */
export type SamplerFactory = (params: SamplingParams, vocabSize: number) => SequenceSampler;

/** A Sampler on this thread. */
export const localSampler: SamplerFactory = (params, vocabSize) => {
  const sampler = new Sampler(params, vocabSize);
  return {
    sample: (logits, history, mask) => sampler.sample(logits, history, mask),
    verify: (logits, history, draft, mask) => sampler.verify(logits, history, draft, mask),
    dispose: () => {},
  };
};
