/**
 * Every ShardExecutor runs the conformance suite (test/suites/shard-executor.suite.ts): the
 * onnxruntime executor on onnxruntime-node (pooled KV, the default on CPU; replaced KV, the
 * WebGPU path's; q4 weights) and on onnxruntime-web's wasm runtime, as a browser peer loads it.
 */
import { afterAll, beforeAll } from 'vitest';
import { browserLoaderOptions } from '../../src/browser/ort-web-runtime.ts';
import { weightSpec, type WeightSpec } from '../../src/core/model/quant/weight-format.ts';
import { loadShardExecutor, type OrtLoaderOptions } from '../../src/core/runtime/ort-loader.ts';
import { getShardArtifact } from '../../src/node/artifact-cache.ts';
import { openLocalModel, type LocalModel } from '../../src/node/local-model.ts';
import { nodeLoaderOptions } from '../../src/node/ort-node-runtime.ts';
import { STORIES_DIR, tempDir } from '../engine/harness.ts';
import { EXECUTOR_RANGE, shardExecutorSuite, type ShardExecutorFixture } from '../suites/shard-executor.suite.ts';

const FP32 = weightSpec('fp32');
const Q4 = weightSpec('fp32', { format: 'q4', blockSize: 32, accuracyLevel: 0 });

let root: { dir: string; remove: () => Promise<void> };
let model: LocalModel;
beforeAll(async () => {
  root = await tempDir('shard-executors');
  process.env.MESHNET_HOME = root.dir;
  model = await openLocalModel(STORIES_DIR);
});
afterAll(() => root.remove());

async function load(weights: WeightSpec, loader: () => Promise<OrtLoaderOptions>, tolerance = 1e-4): Promise<ShardExecutorFixture> {
  const { checkpoint, key } = model;
  const { artifact } = await getShardArtifact(checkpoint, key, { kind: 'layers', range: EXECUTOR_RANGE }, 'fp32', weights);
  const executor = await loadShardExecutor(checkpoint.config, artifact, checkpoint.source, await loader());
  return { executor, weights, hiddenSize: checkpoint.config.hiddenSize, tolerance };
}

const node = (kvMode?: 'pool' | 'replace') => async () => ({ ...(await nodeLoaderOptions({ device: 'cpu', dtype: 'fp32', threads: 1 })), ...(kvMode && { kvMode }) });

shardExecutorSuite('onnxruntime-node, pooled KV', () => load(FP32, node()));
shardExecutorSuite('onnxruntime-node, replaced KV', () => load(FP32, node('replace')), false);
shardExecutorSuite('onnxruntime-node, q4 weights', () => load(Q4, node()));
shardExecutorSuite('onnxruntime-web, wasm', () => load(FP32, async () => browserLoaderOptions({ device: 'wasm' })));
