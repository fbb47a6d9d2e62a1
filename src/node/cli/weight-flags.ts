/** `--weights`, `--quant-block`, `--accuracy-level`: shared by `serve` and `generate`. */
import {
  ACCURACY_LEVELS,
  DEFAULT_QUANT_BLOCK,
  QUANT_BLOCK_SIZES,
  WEIGHT_FORMATS,
  type AccuracyLevel,
  type WeightFormat,
  type WeightRequest,
} from '../../core/model/quant/weight-format.ts';
import { parseChoice, UsageError } from './args.ts';

export const WEIGHT_OPTIONS = {
  weights: { type: 'string' },
  'quant-block': { type: 'string' },
  'accuracy-level': { type: 'string' },
} as const;

export const WEIGHT_USAGE = `  --weights ${WEIGHT_FORMATS.join('|')}
                       how layer, embedding and LM-head weights are stored (default: as --dtype;
                       q4 for AWQ/GPTQ checkpoints). Bytes per weight: fp32 4; fp16 2, but
                       onnxruntime's CPU provider upcasts fp16 weights to a stored fp32 copy at
                       load (no memory saved, no speed gained on a CPU: use q8 there); q8 about
                       1.1 and q4 about 0.6 (block 32), as MatMulNBits on the CPU, wasm and
                       WebGPU. Peers take the format the head assigns
  --quant-block ${QUANT_BLOCK_SIZES.join('|')}
                       weights per scale for q8/q4 (default ${DEFAULT_QUANT_BLOCK})
  --accuracy-level ${ACCURACY_LEVELS.join('|')}
                       q8/q4 compute: 0 dequantizes and computes in float (exact); 4 uses int8
                       activations (fast on a CPU; the default; wasm and WebGPU ignore it)`;

/** The flags as a WeightRequest (choices checked; the checkpoint decides the rest, see resolveWeightSpec). */
export function readWeightFlags(values: { weights?: string; 'quant-block'?: string; 'accuracy-level'?: string }): WeightRequest {
  const pick = <T extends string>(flag: string, value: string | undefined, choices: readonly T[]) => (value === undefined ? undefined : parseChoice(flag, value, choices, choices[0]));
  const format = pick('weights', values.weights, WEIGHT_FORMATS) as WeightFormat | undefined;
  const block = pick('quant-block', values['quant-block'], QUANT_BLOCK_SIZES.map(String));
  const level = pick('accuracy-level', values['accuracy-level'], ACCURACY_LEVELS.map(String));
  if ((block !== undefined || level !== undefined) && format !== undefined && format !== 'q8' && format !== 'q4') {
    throw new UsageError(`--quant-block and --accuracy-level apply to q8 and q4, not --weights ${format}`);
  }
  return {
    ...(format !== undefined && { format }),
    ...(block !== undefined && { blockSize: Number(block) }),
    ...(level !== undefined && { accuracyLevel: Number(level) as AccuracyLevel }),
  };
}
