/**
 * `rope_theta` and `rope_scaling` (or transformers 5's `rope_parameters`) → RopeConfig.
 * Scaling types an architecture does not list are refused by name.
 */
import type { Fields } from './config-fields.ts';
import type { RopeConfig } from './types.ts';
import { parseYarn } from './moe/yarn.ts';

/** What the rotary parser needs to know about the architecture and the model. */
export interface RopeContext {
  readonly name: string;
  /** `rope_scaling` types accepted besides none/`default`. */
  readonly ropeScalingTypes: readonly string[];
  /** Dimensions rotated per head (headDim, or Phi-3's partial rotary): longrope's factor lists hold half as many. */
  readonly rotaryDim?: number;
}

/** Rotary parameters of `fields` (the config, or one entry of a per-layer-type `rope_parameters`). */
export function ropeOf(fields: Fields, spec: RopeContext, defaultTheta = 10000): RopeConfig {
  const parameters = fields.object('rope_parameters');
  const theta = fields.raw('rope_theta') !== undefined ? fields.positiveNumber('rope_theta') : (parameters?.positiveNumber('rope_theta', defaultTheta) ?? defaultTheta);
  const scaling = fields.object('rope_scaling') ?? parameters;
  if (scaling === undefined) return { theta };
  const type = scaling.raw('rope_type') ?? scaling.raw('type') ?? 'default';
  if (type === 'default') return { theta };
  if (typeof type !== 'string' || !spec.ropeScalingTypes.includes(type)) {
    const supported = spec.ropeScalingTypes.length > 0 ? spec.ropeScalingTypes.join(', ') : 'none';
    scaling.fail('rope_type', `${JSON.stringify(type)} is not supported for ${spec.name} (supported: ${supported})`);
  }
  if (type === 'linear') return { theta, linearFactor: scaling.positiveNumber('factor') };
  if (type === 'yarn') return { theta, yarn: parseYarn(scaling, fields.positiveInt('max_position_embeddings')) }; // gpt-oss, moe/yarn.ts
  if (type === 'longrope') return { theta, longrope: longropeOf(fields, scaling, spec) };
  return {
    theta,
    llama3: {
      factor: scaling.positiveNumber('factor'),
      lowFreqFactor: scaling.positiveNumber('low_freq_factor'),
      highFreqFactor: scaling.positiveNumber('high_freq_factor'),
      originalMaxPositionEmbeddings: scaling.positiveInt('original_max_position_embeddings'),
    },
  };
}

/**
 * Hugging Face's `_compute_longrope_parameters`: the pretrained length is config.json's
 * `original_max_position_embeddings` (Phi-3 keeps it at the top level) or the scaling's own;
 * the default attention factor is `sqrt(1 + ln(factor) / ln(original))` with
 * `factor = max_position_embeddings / original` (1 when that is not above 1).
 */
function longropeOf(fields: Fields, scaling: Fields, spec: RopeContext): NonNullable<RopeConfig['longrope']> {
  const half = spec.rotaryDim === undefined ? undefined : spec.rotaryDim / 2;
  const topOriginal = fields.raw('original_max_position_embeddings');
  const original = topOriginal !== undefined ? fields.positiveInt('original_max_position_embeddings') : scaling.positiveInt('original_max_position_embeddings');
  const factor = topOriginal !== undefined ? fields.positiveInt('max_position_embeddings') / original : scaling.positiveNumber('factor', 1);
  const given = scaling.raw('attention_factor');
  const attentionFactor = given !== undefined ? scaling.positiveNumber('attention_factor') : factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(original));
  return { shortFactor: scaling.numbers('short_factor', half), longFactor: scaling.numbers('long_factor', half), originalMaxPositionEmbeddings: original, attentionFactor };
}
