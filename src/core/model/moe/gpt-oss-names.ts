/**
 * gpt-oss tensor names, as openai/gpt-oss-* on the Hub spell them (E experts, H hidden, I
 * expert width, n heads):
 *
 *   model.layers.{l}.self_attn.sinks                       [n]          one sink logit per head
 *   model.layers.{l}.self_attn.o_proj.bias                 [H]          (q/k/v biases as usual)
 *   model.layers.{l}.mlp.router.weight / .bias             [E, H] / [E]
 *   model.layers.{l}.mlp.experts.gate_up_proj_bias         [E, 2I]      gate and up interleaved
 *   model.layers.{l}.mlp.experts.down_proj_bias            [E, H]
 *   float experts (bf16 exports):
 *   model.layers.{l}.mlp.experts.gate_up_proj              [E, H, 2I]   [in, out]: x @ W
 *   model.layers.{l}.mlp.experts.down_proj                 [E, I, H]
 *   MXFP4 experts (quantization_config mxfp4), U8, [out, in] in blocks of 32:
 *   model.layers.{l}.mlp.experts.gate_up_proj_blocks       [E, 2I, H/32, 16]  two e2m1 codes a byte, low nibble first
 *   model.layers.{l}.mlp.experts.gate_up_proj_scales       [E, 2I, H/32]      e8m0: 2^(s − 127)
 *   model.layers.{l}.mlp.experts.down_proj_blocks          [E, H, I/32, 16]
 *   model.layers.{l}.mlp.experts.down_proj_scales          [E, H, I/32]
 */
import type { ModelConfig } from '../types.ts';

export interface GptOssLayerNames {
  readonly sinks: string;
  readonly oBias: string;
  readonly router: string;
  readonly routerBias: string;
  /** Float `[E, H, 2I]`, or MXFP4 `_blocks` / `_scales` (names without the suffix). */
  readonly gateUp: string;
  readonly gateUpBias: string;
  readonly down: string;
  readonly downBias: string;
}

/** gpt-oss names of `layer`; undefined for other architectures. */
export function gptOssLayerNames(config: ModelConfig, layer: number): GptOssLayerNames | undefined {
  if (config.moe?.family !== 'gpt-oss') return undefined;
  const p = `model.layers.${layer}`;
  return {
    sinks: `${p}.self_attn.sinks`,
    oBias: `${p}.self_attn.o_proj.bias`,
    router: `${p}.mlp.router.weight`,
    routerBias: `${p}.mlp.router.bias`,
    gateUp: `${p}.mlp.experts.gate_up_proj`,
    gateUpBias: `${p}.mlp.experts.gate_up_proj_bias`,
    down: `${p}.mlp.experts.down_proj`,
    downBias: `${p}.mlp.experts.down_proj_bias`,
  };
}

export function gptOssTensorShapes(config: ModelConfig, layer: number): { name: string; shape: number[]; dtype?: 'U8' }[] {
  const names = gptOssLayerNames(config, layer)!;
  const { hiddenSize: H, numHeads } = config;
  const { numExperts: E, expertIntermediateSize: I, gptOss } = config.moe!;
  const experts = gptOss!.mxfp4
    ? [
        { name: `${names.gateUp}_blocks`, shape: [E, 2 * I, H / 32, 16], dtype: 'U8' as const },
        { name: `${names.gateUp}_scales`, shape: [E, 2 * I, H / 32], dtype: 'U8' as const },
        { name: `${names.down}_blocks`, shape: [E, H, I / 32, 16], dtype: 'U8' as const },
        { name: `${names.down}_scales`, shape: [E, H, I / 32], dtype: 'U8' as const },
      ]
    : [
        { name: names.gateUp, shape: [E, H, 2 * I] },
        { name: names.down, shape: [E, I, H] },
      ];
  return [
    { name: names.sinks, shape: [numHeads] },
    { name: names.oBias, shape: [H] },
    { name: names.router, shape: [E, H] },
    { name: names.routerBias, shape: [E] },
    ...experts,
    { name: names.gateUpBias, shape: [E, 2 * I] },
    { name: names.downBias, shape: [E, H] },
  ];
}
