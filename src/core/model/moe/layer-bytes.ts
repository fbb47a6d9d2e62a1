/**
 * The planner's unit, one decoder layer's packed weight bytes, for models whose layers differ:
 * a MoE model's sparse layers hold every expert (a peer holding the layer loads them all, even
 * though a token reads only k), its dense layers (`mlp_only_layers`, `decoder_sparse_step`) one
 * MLP. The planner budgets every layer at the largest.
 */
import type { WeightSpec } from '../quant/weight-format.ts';
import { partWeightBytes } from '../shard-artifact.ts';
import type { ActivationDtype } from '../activations.ts';
import type { ModelConfig, TensorLocation } from '../types.ts';

/** Packed bytes of the largest decoder layer in `weights` (layer 0 for a model whose layers are alike). */
export function largestLayerBytes(config: ModelConfig, tensors: ReadonlyMap<string, TensorLocation>, dtype: ActivationDtype, weights: WeightSpec): number {
  const layerBytes = (layer: number) => partWeightBytes(config, tensors, { kind: 'layers', range: { start: layer, end: layer + 1 } }, dtype, weights);
  const moe = config.moe;
  if (!moe) return layerBytes(0);
  // Sparse layers are alike, and so are dense ones: one of each.
  const dense = Array.from({ length: config.numLayers }, (_, l) => l).find((l) => !moe.sparseLayers.includes(l));
  return Math.max(...[moe.sparseLayers[0], dense].filter((l): l is number => l !== undefined).map(layerBytes));
}
