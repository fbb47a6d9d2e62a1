/**
 * The Phi-3 parts of `config.json` (Phi3ForCausalLM: Phi-3-mini/medium, Phi-3.5-mini,
 * Phi-4-mini), as transformers' Phi3Config reads them: `partial_rotary_factor` (rotary on the
 * first `head_dim · factor` dimensions of each head), `longrope` scaling with its short and
 * long factor lists (half the rotary dimensions each) against the top-level
 * `original_max_position_embeddings`, and fused `qkv_proj` / `gate_up_proj` weights.
 */
import type { Fields } from '../config-fields.ts';
import { ropeOf, type RopeContext } from '../rope-config.ts';
import type { ModelConfig } from '../types.ts';

export type Phi3Parts = Pick<ModelConfig, 'rope' | 'rotaryDim' | 'fusedProjections'>;

export function phi3Parts(fields: Fields, spec: RopeContext, headDim: number): Phi3Parts {
  const factor = fields.raw('partial_rotary_factor') === undefined ? 1 : fields.positiveNumber('partial_rotary_factor');
  const rotaryDim = Math.floor(headDim * factor);
  if (factor > 1 || rotaryDim % 2 !== 0 || rotaryDim === 0) {
    fields.fail('partial_rotary_factor', `(${factor}) must give an even rotary dimension in (0, head_dim ${headDim}], got ${rotaryDim}`);
  }
  return {
    rope: ropeOf(fields, { ...spec, rotaryDim }),
    ...(rotaryDim !== headDim ? { rotaryDim } : {}),
    fusedProjections: true,
  };
}
