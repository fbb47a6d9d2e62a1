/** The Mesh's description of a locally opened model: what peers are told in `assign`. */
import type { ShardConfigSummary } from '../shared/control.ts';
import type { WireDtype } from '../shared/protocol.ts';
import { partName } from '../core/model/shard-artifact.ts';
import { bytesPerLayer, type MeshModel } from '../core/route/mesh.ts';
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

/** `name` is what clients call the model (folder name, Hub id or 'demo'). */
export function meshModel(model: LocalModel, name: string, dtype: WireDtype): MeshModel {
  return {
    modelKey: model.key,
    name,
    config: configSummary(model),
    dtype,
    bytesPerLayer: bytesPerLayer({ ...configSummary(model), intermediateSize: model.checkpoint.config.intermediateSize }, dtype),
    artifactUrl: (range) => `/artifacts/${model.key}/${partName({ kind: 'layers', range }, dtype)}`,
  };
}
