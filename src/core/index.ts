/** meshnet's platform-agnostic engine: what every runtime shares. */
export * from './model/types.ts';
export { openCheckpoint, type Checkpoint } from './model/checkpoint.ts';
export { buildShardArtifact, loadShardWeights, partName, type ShardArtifact, type ShardManifest, type ShardPart } from './model/shard-artifact.ts';
export { buildShardGraph, type ActivationDtype } from './model/shard-graph.ts';
export { createTokenizer, type TextTokenizer } from './model/tokenizer.ts';
export { StreamDecoder } from './model/stream-decoder.ts';
export { KvState, type KvTensorOps } from './runtime/kv-state.ts';
export { KvStore } from './runtime/kv-store.ts';
export { CacheMissError, type Activations, type ShardExecutor, type ShardStep } from './runtime/shard-executor.ts';
export { loadHeadRunner, loadShardExecutor } from './runtime/ort-loader.ts';
export { generateLocal, type LocalPipeline } from './route/local-pipeline.ts';
export { rangesFromSplit } from './mesh/split.ts';
export * from './sampling/index.ts';
