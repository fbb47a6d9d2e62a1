/** Token sampling: pure, seeded, runtime-independent. */

export { createRng, restoreRng, type Rng, type RngState } from './rng.ts';
export {
  MAX_TOP_LOGPROBS,
  SamplingParamError,
  defaultSamplingParams,
  isPlainGreedy,
  validateSamplingParams,
  type SamplingParams,
} from './params.ts';
export { applyPenalties, type PenaltyParams, type TokenHistory } from './penalties.ts';
export { selectTopN } from './select.ts';
export {
  createCandidateScratch,
  selectCandidates,
  type CandidateScratch,
  type CandidateSet,
  type FilterParams,
} from './candidates.ts';
export {
  ConstraintDeadEndError,
  ConstraintViolationError,
  maskAllowsAny,
  applyTokenMask,
  maskAllows,
  type TokenConstraint,
  type TokenMask,
} from './constraint.ts';
export { Sampler, type SampledToken, type TokenLogprob, type VerifiedSample } from './sampler.ts';
export { localSampler, type SamplerFactory, type SequenceSampler } from './sequence-sampler.ts';
export { verifyDraft, type DraftDistribution, type DraftToken, type VerifiedToken } from './speculative.ts';
export {
  StopChecker,
  StopStringMatcher,
  type FinishReason,
  type StopMatch,
} from './stop.ts';
