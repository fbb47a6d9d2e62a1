/**
 * Tensor names of a sparse MoE block, as the Hugging Face Hub's checkpoints spell them:
 *
 *   Mixtral              model.layers.{l}.block_sparse_moe.gate.weight              [E, H]
 *                        model.layers.{l}.block_sparse_moe.experts.{e}.w1.weight    [I, H]  gate
 *                        model.layers.{l}.block_sparse_moe.experts.{e}.w3.weight    [I, H]  up
 *                        model.layers.{l}.block_sparse_moe.experts.{e}.w2.weight    [H, I]  down
 *   Qwen2-MoE, Qwen3-MoE model.layers.{l}.mlp.gate.weight                           [E, H]
 *                        model.layers.{l}.mlp.experts.{e}.{gate,up,down}_proj.weight
 *   Qwen2-MoE also       model.layers.{l}.mlp.shared_expert.{gate,up,down}_proj.weight  (width S)
 *                        model.layers.{l}.mlp.shared_expert_gate.weight             [1, H]
 */
import { isSparseLayer, type MoeConfig } from './moe-config.ts';
import type { ModelConfig } from '../types.ts';
import { gptOssTensorShapes } from './gpt-oss-names.ts';

/** One SwiGLU MLP's three linear weights ([out, in] each). */
export interface MlpNames {
  readonly gate: string; // [I, H]
  readonly up: string; //   [I, H]
  readonly down: string; // [H, I]
}

export interface MoeLayerNames {
  readonly router: string; // [E, H]
  readonly experts: readonly MlpNames[];
  readonly shared?: MlpNames & { readonly gateWeight: string }; // gateWeight [1, H]
}

/** The MoE tensor names of `layer`, or undefined when its MLP is dense. */
export function moeLayerNames(config: ModelConfig, layer: number): MoeLayerNames | undefined {
  const moe = config.moe;
  if (!isSparseLayer(moe, layer) || moe.family === 'gpt-oss') return undefined;
  const experts = Array.from({ length: moe.numExperts }, (_, e) => expertNames(moe, layer, e));
  if (moe.family === 'mixtral') return { router: `model.layers.${layer}.block_sparse_moe.gate.weight`, experts };
  const p = `model.layers.${layer}.mlp`;
  return {
    router: `${p}.gate.weight`,
    experts,
    ...(moe.sharedExpertIntermediateSize !== undefined
      ? { shared: { gate: `${p}.shared_expert.gate_proj.weight`, up: `${p}.shared_expert.up_proj.weight`, down: `${p}.shared_expert.down_proj.weight`, gateWeight: `${p}.shared_expert_gate.weight` } }
      : {}),
  };
}

function expertNames(moe: MoeConfig, layer: number, expert: number): MlpNames {
  if (moe.family === 'mixtral') {
    const p = `model.layers.${layer}.block_sparse_moe.experts.${expert}`;
    return { gate: `${p}.w1.weight`, up: `${p}.w3.weight`, down: `${p}.w2.weight` };
  }
  const p = `model.layers.${layer}.mlp.experts.${expert}`;
  return { gate: `${p}.gate_proj.weight`, up: `${p}.up_proj.weight`, down: `${p}.down_proj.weight` };
}

/** Every tensor of `layer`'s MoE block with its expected shape ([] for a dense layer). */
export function moeTensorShapes(config: ModelConfig, layer: number): { name: string; shape: number[]; dtype?: 'U8' }[] {
  if (config.moe?.family === 'gpt-oss') return gptOssTensorShapes(config, layer);
  const names = moeLayerNames(config, layer);
  if (!names || !config.moe) return [];
  const H = config.hiddenSize;
  const mlp = (n: MlpNames, width: number) => [
    { name: n.gate, shape: [width, H] },
    { name: n.up, shape: [width, H] },
    { name: n.down, shape: [H, width] },
  ];
  const shapes = [{ name: names.router, shape: [config.moe.numExperts, H] }, ...names.experts.flatMap((n) => mlp(n, config.moe!.expertIntermediateSize))];
  if (names.shared) shapes.push(...mlp(names.shared, config.moe.sharedExpertIntermediateSize!), { name: names.shared.gateWeight, shape: [1, H] });
  return shapes;
}
