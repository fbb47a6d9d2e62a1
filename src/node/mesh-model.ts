/** The Mesh's description of a locally opened model: what peers are told in `assign`, and what the planner budgets. */
import type { ShardConfigSummary } from '../shared/control.ts';
import type { WireDtype } from '../shared/protocol.ts';
import type { WeightSpec } from '../core/model/quant/weight-format.ts';
import { partName, partWeightBytes } from '../core/model/shard-artifact.ts';
import { largestLayerBytes } from '../core/model/moe/layer-bytes.ts';
import type { MeshModel } from '../core/mesh/mesh-model.ts';
import type { LocalModel } from './local-model.ts';

export function configSummary(model: LocalModel): ShardConfigSummary {
  const c = model.checkpoint.config;
  return {
    architecture: c.architecture,
    numLayers: c.numLayers,
    hiddenSize: c.hiddenSize,
    numHeads: c.numHeads,
    numKvHeads: c.numKvHeads,
    headDim: c.headDim,
    vocabSize: c.vocabSize,
  };
}

/**
 * `name` is what clients call the model (folder name, Hub id or 'demo'). Layer and head bytes
 * are the packed weights of the chosen format, as the artifacts will hold them.
 */
export function meshModel(model: LocalModel, name: string, dtype: WireDtype, weights: WeightSpec): MeshModel & { headBytes: number } {
  const { config, tensors } = model.checkpoint;
  const bytes = (part: Parameters<typeof partWeightBytes>[2]) => partWeightBytes(config, tensors, part, dtype, weights);
  return {
    modelKey: model.key,
    name,
    config: configSummary(model),
    artifacts: { dtype, weights, url: (range) => `/artifacts/${model.key}/${partName({ kind: 'layers', range }, dtype, weights)}` },
    bytesPerLayer: largestLayerBytes(config, tensors, dtype, weights), // a MoE layer with all its experts
    headBytes: bytes({ kind: 'embedding' }) + bytes({ kind: 'head' }),
  };
}
