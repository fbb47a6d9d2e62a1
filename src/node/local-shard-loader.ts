/**
 * ShardLoader for a peer that has the checkpoint on its own disk (the head's own layers,
 * in-process tests): artifacts from the local cache, weights read by offset.
 */
import type { AssignMessage } from '../shared/control.ts';
import { assignedWeights, type ShardLoader } from '../core/peer/shard-loader.ts';
import { loadShardExecutor } from '../core/runtime/ort-loader.ts';
import type { ShardExecutor } from '../core/runtime/shard-executor.ts';
import { cpuAttention } from '../core/model/shard-artifact.ts';
import { getShardArtifact } from './artifact-cache.ts';
import type { LocalModel } from './local-model.ts';
import { nodeLoaderOptions, type NodeRuntimeOptions } from './ort-node-runtime.ts';

export function localShardLoader(model: LocalModel, runtime: Omit<NodeRuntimeOptions, 'dtype'>): ShardLoader {
  return {
    async load(assign: AssignMessage): Promise<ShardExecutor> {
      if (assign.modelKey !== model.key) throw new Error(`this peer holds model ${model.key}, not ${assign.modelKey}`);
      // onnxruntime-node's CPU provider: the attention it runs best (cpuAttention); other devices keep GQA.
      const attention = runtime.device === 'cpu' ? cpuAttention(model.checkpoint.config) : 'gqa';
      const { artifact } = await getShardArtifact(model.checkpoint, model.key, { kind: 'layers', range: assign.range }, assign.dtype, assignedWeights(assign), undefined, attention);
      const loader = await nodeLoaderOptions({ ...runtime, dtype: assign.dtype });
      return loadShardExecutor(model.checkpoint.config, artifact, model.checkpoint.source, loader) as Promise<ShardExecutor>;
    },
  };
}
