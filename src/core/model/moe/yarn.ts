/**
 * YaRN rotary scaling (`rope_scaling.rope_type: "yarn"`, gpt-oss), as Hugging Face's
 * `_compute_yarn_parameters` computes it: inverse frequencies blended between interpolation
 * (÷ factor) and extrapolation by a linear ramp over the correction range of `beta_fast` /
 * `beta_slow` rotations (rounded out unless `truncate` is false), and an attention factor
 * (0.1·ln(factor) + 1 unless given) that scales cos and sin.
 */
import type { MoeFields } from './fields.ts';

export interface YarnConfig {
  readonly factor: number;
  readonly betaFast: number;
  readonly betaSlow: number;
  readonly originalMaxPositionEmbeddings: number;
  readonly truncate: boolean;
  readonly attentionFactor: number;
}

export function parseYarn(scaling: MoeFields, maxPositionEmbeddings: number): YarnConfig {
  let factor = scaling.positiveNumber('factor');
  const original = scaling.raw('original_max_position_embeddings');
  // As transformers: with an original length given, the factor is the ratio of the two lengths.
  if (original !== undefined) factor = maxPositionEmbeddings / scaling.positiveInt('original_max_position_embeddings');
  const mscale = (scale: number, m = 1) => (scale <= 1 ? 1 : 0.1 * m * Math.log(scale) + 1);
  const m = scaling.raw('mscale') as number | undefined;
  const mAll = scaling.raw('mscale_all_dim') as number | undefined;
  const attentionFactor =
    scaling.raw('attention_factor') !== undefined
      ? scaling.positiveNumber('attention_factor')
      : m && mAll
        ? mscale(factor, scaling.positiveNumber('mscale')) / mscale(factor, scaling.positiveNumber('mscale_all_dim'))
        : mscale(factor);
  return {
    factor,
    betaFast: scaling.positiveNumber('beta_fast', 32),
    betaSlow: scaling.positiveNumber('beta_slow', 1),
    originalMaxPositionEmbeddings: original === undefined ? maxPositionEmbeddings : (original as number),
    truncate: scaling.boolean('truncate', true),
    attentionFactor,
  };
}

/** Inverse frequencies `[headDim / 2]` under YaRN (float32 values, as torch computes them). */
export function yarnInverseFrequencies(theta: number, headDim: number, yarn: YarnConfig): Float64Array {
  const half = headDim / 2;
  const correctionDim = (rotations: number) => (headDim * Math.log(yarn.originalMaxPositionEmbeddings / (rotations * 2 * Math.PI))) / (2 * Math.log(theta));
  let low = correctionDim(yarn.betaFast);
  let high = correctionDim(yarn.betaSlow);
  if (yarn.truncate) [low, high] = [Math.floor(low), Math.ceil(high)];
  low = Math.max(low, 0);
  high = Math.min(high, headDim - 1);
  if (low === high) high += 0.001;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) {
    const posFreq = Math.fround(Math.pow(theta, Math.fround((2 * i) / headDim)));
    const extrapolation = Math.fround(1 / posFreq);
    const interpolation = Math.fround(1 / Math.fround(yarn.factor * posFreq));
    const ramp = Math.min(1, Math.max(0, Math.fround((i - low) / (high - low))));
    const extrapolationFactor = Math.fround(1 - ramp);
    inv[i] = Math.fround(interpolation * (1 - extrapolationFactor) + extrapolation * extrapolationFactor);
  }
  return inv;
}
