/**
 * `config.json`'s `quantization_config` for checkpoints that come pre-quantized from the Hub:
 * AutoGPTQ / GPTQModel (`quant_method: "gptq"`) and AutoAWQ GEMM (`quant_method: "awq"`),
 * 4-bit. Anything else is refused with an error naming what is supported.
 */
import { CheckpointError } from '../checkpoint-error.ts';

export interface PrequantizedConfig {
  readonly method: 'gptq' | 'awq';
  readonly bits: 4;
  /** Input rows per group; −1 (one group per row of the whole input dimension) as the checkpoint says. */
  readonly groupSize: number;
  /** GPTQ act-order: input columns were quantized in a permuted order (`g_idx` says which group each has). */
  readonly descAct: boolean;
  /** GPTQ v1 (`checkpoint_format` "gptq", AutoGPTQ's default) stores zero − 1; v2 and AWQ store the zero. */
  readonly zeroOffset: 0 | 1;
  /** `modules_to_not_convert` (AWQ) / modules left in float: their `.weight` is used as is. */
  readonly floatModules: readonly string[];
}

const SUPPORTED = 'supported: quant_method "gptq" (checkpoint_format gptq or gptq_v2) or "awq" (version gemm), bits 4';

/** The pre-quantization of `json.quantization_config`, undefined when there is none. */
export function parseQuantizationConfig(file: string, json: Record<string, unknown>): PrequantizedConfig | undefined {
  const raw = json.quantization_config;
  if (raw === undefined || raw === null) return undefined;
  const fail = (problem: string): never => {
    throw new CheckpointError(file, `quantization_config: ${problem} (${SUPPORTED})`);
  };
  if (typeof raw !== 'object' || Array.isArray(raw)) return fail(`must be an object, got ${JSON.stringify(raw)}`);
  const q = raw as Record<string, unknown>;
  const method = q.quant_method;
  if (method !== 'gptq' && method !== 'awq') return fail(`quant_method ${JSON.stringify(method)} is not supported`);
  const bits = q.bits ?? q.w_bit;
  if (bits !== 4) return fail(`${method} with bits ${JSON.stringify(bits)} is not supported`);
  const groupSize = q.group_size ?? q.q_group_size;
  if (!(groupSize === -1 || (Number.isSafeInteger(groupSize) && (groupSize as number) > 0))) return fail(`group_size ${JSON.stringify(groupSize)} must be a positive integer or -1`);
  const floatModules = Array.isArray(q.modules_to_not_convert) ? q.modules_to_not_convert.filter((m): m is string => typeof m === 'string') : [];
  if (method === 'awq') {
    const version = typeof q.version === 'string' ? q.version.toLowerCase() : 'gemm';
    if (version !== 'gemm') return fail(`awq version ${JSON.stringify(q.version)} is not supported`);
    if (q.zero_point === false) return fail('awq with zero_point false is not supported');
    return { method, bits: 4, groupSize: groupSize as number, descAct: false, zeroOffset: 0, floatModules };
  }
  const format = q.checkpoint_format ?? 'gptq';
  if (format !== 'gptq' && format !== 'gptq_v2') return fail(`gptq checkpoint_format ${JSON.stringify(format)} is not supported`);
  if (q.desc_act !== undefined && typeof q.desc_act !== 'boolean') return fail(`desc_act must be true or false, got ${JSON.stringify(q.desc_act)}`);
  return { method, bits: 4, groupSize: groupSize as number, descAct: q.desc_act === true, zeroOffset: format === 'gptq' ? 1 : 0, floatModules };
}
