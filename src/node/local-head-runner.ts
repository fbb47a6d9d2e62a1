/**
 * The head's embedding and LM head for a local model: both artifacts from the cache (built on
 * first use), loaded as one OrtHeadRunner. The head loads it on its main thread
 * (`headThread: 'main'`) or inside the head worker (head-worker-main.ts).
 */
import type { ActivationDtype } from '../core/model/activations.ts';
import type { WeightSpec } from '../core/model/quant/weight-format.ts';
import { loadHeadRunner, type OrtLoaderOptions } from '../core/runtime/ort-loader.ts';
import type { OrtHeadRunner } from '../core/runtime/ort-head-runner.ts';
import { getShardArtifact } from './artifact-cache.ts';
import type { LocalModel } from './local-model.ts';

export async function loadLocalHeadRunner(model: LocalModel, dtype: ActivationDtype, weights: WeightSpec, loader: OrtLoaderOptions): Promise<OrtHeadRunner> {
  const embedding = await getShardArtifact(model.checkpoint, model.key, { kind: 'embedding' }, dtype, weights);
  const head = await getShardArtifact(model.checkpoint, model.key, { kind: 'head' }, dtype, weights);
  return loadHeadRunner(model.checkpoint.config, embedding.artifact, head.artifact, model.checkpoint.source, loader);
}
