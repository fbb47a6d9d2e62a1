/**
 * meshnet's platform-agnostic engine: what every runtime shares. The package's default entry,
 * and the one door the Node head (`src/node/head/head-node.ts`) takes into core: the model
 * (checkpoints, graphs, weight formats, limits), the runtime seams (executors, links, KV),
 * the mesh (membership, planning, warm-up), the Route Sessions and core's one request entry
 * (`Completions`), the drafters, and sampling.
 */
export * from './model/types.ts';
export { openCheckpoint, type Checkpoint } from './model/checkpoint.ts';
export { buildShardArtifact, loadShardWeights, partName, type ShardArtifact, type ShardManifest, type ShardPart } from './model/shard-artifact.ts';
export { buildShardGraph } from './model/shard-graph.ts';
export type { ActivationDtype } from './model/activations.ts';
export { createTokenizer, type TextTokenizer } from './model/tokenizer.ts';
export { StreamDecoder } from './model/stream-decoder.ts';
export { KvState, type KvTensorOps } from './runtime/kv-state.ts';
export { KvStore } from './runtime/kv-store.ts';
export { CacheMissError, type Activations, type ShardExecutor, type ShardStep } from './runtime/shard-executor.ts';
export { loadHeadRunner, loadShardExecutor } from './runtime/ort-loader.ts';
export { generateLocal, type LocalPipeline } from './route/local-pipeline.ts';
export { rangesFromSplit } from './mesh/split.ts';
export * from './sampling/index.ts';
export { asWeightSpec, type WeightFormat, type WeightSpec } from './model/quant/weight-format.ts';
export { generationLimits, naturalEndTokens, type GenerationLimits, type NaturalEnd } from './model/generation-limits.ts';
export type { ShardService } from './runtime/shard-service.ts';
export type { PeerLink } from './runtime/peer-link.ts';
export type { ChainListener, ChainPort } from './runtime/chain-port.ts';
export { ROUTE_MODES, type RouteMode } from './route/chain-route.ts';
export { InProcessLink } from './runtime/in-process-link.ts';
export { BatchingHeadRunner } from './runtime/batching-head.ts';
export type { HeadRunner } from './runtime/ort-head-runner.ts';
export { Mesh } from './mesh/mesh.ts';
export { HEAD_PEER_ID } from './mesh/plan-route.ts';
export { warmUp } from './mesh/warm-up.ts';
export type { QuarantinePolicy } from './mesh/quarantine.ts';
export { Completions } from './route/completions.ts';
export { RouteSessions, type SessionObserver } from './route/route-sessions.ts';
export { PrefixRegistry } from './route/prefix-registry.ts';
export { PrefixForgetter } from './route/prefix-forget.ts';
export { HopVerifier, type VerifyResult } from './route/verify-hop.ts';
export type { SpeculateMode } from './speculation/drafter.ts';
export { Drafters } from './speculation/drafters.ts';
