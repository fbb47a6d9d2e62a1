/**
 * Weight formats: how a shard stores its linear weights (and the embedding and LM head).
 *
 * | format | linear layers                          | embedding                     | bytes / weight (block 32) |
 * | ------ | -------------------------------------- | ----------------------------- | ------------------------- |
 * | fp32   | Gemm over fp32                         | Gather over fp32              | 4                         |
 * | fp16   | Gemm over fp16 (cast when activations  | Gather over fp16 (cast)       | 2                         |
 * |        | are fp32: onnxruntime folds the cast   |                               |                           |
 * |        | into a stored fp32 copy at load)       |                               |                           |
 * | q8     | MatMulNBits bits 8, symmetric          | GatherBlockQuantized bits 8   | 1 + scale/block           |
 * | q4     | MatMulNBits bits 4, zero points        | GatherBlockQuantized bits 4   | ½ + (scale + ½ zp)/block  |
 *
 * Norms, biases and rotary tables stay float in the activation dtype. `accuracyLevel` is
 * MatMulNBits' attribute: 0 dequantizes and computes in float (exact over the dequantized
 * weights), 4 quantizes activations to int8 inside the op (fast on CPU; wasm and WebGPU on
 * SwiftShader ignore it).
 */
import type { ActivationDtype } from '../activations.ts';
import type { ModelConfig } from '../types.ts';
import { isValidBlockSize, type QuantBits } from './block-quant.ts';

export type WeightFormat = 'fp32' | 'fp16' | 'q8' | 'q4';
export const WEIGHT_FORMATS: readonly WeightFormat[] = ['fp32', 'fp16', 'q8', 'q4'];
export const QUANT_BLOCK_SIZES: readonly number[] = [32, 64, 128];
export type AccuracyLevel = 0 | 4;
export const ACCURACY_LEVELS: readonly AccuracyLevel[] = [0, 4];
/** Default block size: the finest the flag offers (best quality; llama.cpp's Q4_0/Q8_0 use 32 too). */
export const DEFAULT_QUANT_BLOCK = 32;
/**
 * Default accuracy level: 4 (int8 activations inside MatMulNBits). On this CPU, 4-bit level 4
 * is ~1.7× faster than level 0 and 8-bit level 0 is 5× slower than fp32 (docs/platform.md), and
 * level 4 keeps ≥ 99% top-1 agreement with the exact path (test/quant/accuracy-level.test.ts).
 */
export const DEFAULT_ACCURACY_LEVEL: AccuracyLevel = 4;

/** A weight format with its block size and accuracy level (both ignored for fp32/fp16). */
export interface WeightSpec {
  readonly format: WeightFormat;
  readonly blockSize: number;
  readonly accuracyLevel: AccuracyLevel;
}

export class WeightSpecError extends Error {
  override readonly name = 'WeightSpecError';
}

export const isQuantized = (format: WeightFormat): format is 'q8' | 'q4' => format === 'q8' || format === 'q4';
export const quantBits = (format: 'q8' | 'q4'): QuantBits => (format === 'q8' ? 8 : 4);
/** q4 keeps zero points (asymmetric blocks: better 4-bit quality); q8 is symmetric. */
export const usesZeroPoints = (format: 'q8' | 'q4'): boolean => format === 'q4';

/**
 * The spec for flags `--weights`, `--quant-block`, `--accuracy-level`. `format` defaults to
 * the activation dtype (today's behaviour). fp32 weights with fp16 activations are refused:
 * the fp16 format is the float choice there.
 */
export function weightSpec(
  dtype: ActivationDtype,
  options: { format?: WeightFormat; blockSize?: number; accuracyLevel?: AccuracyLevel } = {},
): WeightSpec {
  const format = options.format ?? dtype;
  if (!WEIGHT_FORMATS.includes(format)) throw new WeightSpecError(`weight format '${String(format)}' is not one of ${WEIGHT_FORMATS.join(', ')}`);
  if (format === 'fp32' && dtype === 'fp16') throw new WeightSpecError('fp32 weights need fp32 activations; with --dtype fp16 use --weights fp16, q8 or q4');
  if (!isQuantized(format)) return { format, blockSize: 0, accuracyLevel: 0 };
  const blockSize = options.blockSize ?? DEFAULT_QUANT_BLOCK;
  if (!QUANT_BLOCK_SIZES.includes(blockSize)) throw new WeightSpecError(`block size ${blockSize} is not one of ${QUANT_BLOCK_SIZES.join(', ')}`);
  const accuracyLevel = options.accuracyLevel ?? DEFAULT_ACCURACY_LEVEL;
  if (!ACCURACY_LEVELS.includes(accuracyLevel)) throw new WeightSpecError(`accuracy level ${String(accuracyLevel)} is not one of ${ACCURACY_LEVELS.join(', ')}`);
  return { format, blockSize, accuracyLevel };
}

/** Canonical text of a spec, used in part names, cache folders and on the wire: `fp32`, `q4-b32-acc4`. */
export function weightSpecName(spec: WeightSpec): string {
  return isQuantized(spec.format) ? `${spec.format}-b${spec.blockSize}-acc${spec.accuracyLevel}` : spec.format;
}

const SPEC_PATTERN = /^(?:(fp32|fp16)|(q8|q4)-b(\d{2,3})-acc([04]))$/;

/** The spec a canonical name stands for, or undefined. */
export function parseWeightSpecName(name: string): WeightSpec | undefined {
  const match = SPEC_PATTERN.exec(name);
  if (!match) return undefined;
  if (match[1]) return { format: match[1] as WeightFormat, blockSize: 0, accuracyLevel: 0 };
  const blockSize = Number(match[3]);
  if (!isValidBlockSize(blockSize)) return undefined;
  return { format: match[2] as WeightFormat, blockSize, accuracyLevel: Number(match[4]) as AccuracyLevel };
}

export function sameWeightSpec(a: WeightSpec, b: WeightSpec): boolean {
  return weightSpecName(a) === weightSpecName(b);
}

/**
 * The spec for an option that may be a full spec, a bare format name (its defaults: block
 * 32, level 4) or absent (resolveWeightSpec's default for the checkpoint).
 */
export function asWeightSpec(config: Pick<ModelConfig, 'quantization'>, dtype: ActivationDtype, weights?: WeightSpec | WeightFormat): WeightSpec {
  if (weights === undefined) return resolveWeightSpec(config, dtype);
  return typeof weights === 'string' ? resolveWeightSpec(config, dtype, { format: weights }) : weights;
}

/** What a user asked for (`--weights`, `--quant-block`, `--accuracy-level`); absent fields take defaults. */
export interface WeightRequest {
  readonly format?: WeightFormat;
  readonly blockSize?: number;
  readonly accuracyLevel?: AccuracyLevel;
}

/**
 * The spec to serve `config` with: as requested, defaulting the format to the activation dtype,
 * or to q4 for a pre-quantized (AWQ/GPTQ) checkpoint, which only q4 can serve without a float
 * round trip. Throws WeightSpecError naming the problem.
 */
export function resolveWeightSpec(config: Pick<ModelConfig, 'quantization'>, dtype: ActivationDtype, request: WeightRequest = {}): WeightSpec {
  const pre = config.quantization;
  const format = request.format ?? (pre ? 'q4' : dtype);
  if (pre && format !== 'q4') {
    throw new WeightSpecError(`this checkpoint is ${pre.method.toUpperCase()} 4-bit (group size ${pre.groupSize}): it is served as q4 (its default), not ${format}`);
  }
  return weightSpec(dtype, { ...request, format });
}
