/**
 * `--draft-model DIR|HUB_ID`: a small model the head runs itself to draft tokens for
 * speculative decoding. Its embedding and LM head run on the head's thread (they are small),
 * its layers in a worker thread like the head's own layers (onnxruntime blocks the thread it
 * runs on). It must speak the model's vocabulary: the same size and the same piece for
 * every id, or drafts would be verified as other tokens than they meant; a different one is
 * refused with a clear error before anything is served.
 */
import { resolveWeightSpec } from '../../core/model/quant/weight-format.ts';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ActivationDtype } from '../../core/model/activations.ts';
import type { TextTokenizer } from '../../core/model/tokenizer.ts';
import { loadHeadRunner } from '../../core/runtime/ort-loader.ts';
import { InProcessLink } from '../../core/runtime/in-process-link.ts';
import type { DraftModel } from '../../core/speculation/model-drafter.ts';
import { getShardArtifact } from '../artifact-cache.ts';
import { openLocalModel, type LocalModel } from '../local-model.ts';
import { configSummary } from '../mesh-model.ts';
import { resolveModel } from '../models/resolve-model.ts';
import { nodeLoaderOptions } from '../ort-node-runtime.ts';
import { WorkerShardService } from '../peer/worker-shard.ts';
import { loadTokenizer } from '../tokenizer-files.ts';

/** The draft model cannot draft for this model (another vocabulary), or could not be found. */
export class DraftModelError extends Error {
  override readonly name = 'DraftModelError';
}

export interface LoadedDraftModel extends DraftModel {
  /** What `--draft-model` named (folder name or Hub id). */
  readonly id: string;
  readonly model: LocalModel;
  dispose(): Promise<void>;
}

export interface DraftModelOptions {
  readonly device: string;
  readonly dtype: ActivationDtype;
  readonly threads?: number;
  /** Memory for the draft model's layers and KV in its worker (default 1 GiB). */
  readonly memoryBudgetBytes?: number;
  readonly log?: (line: string) => void;
}

/**
 * Refuses a draft vocabulary that differs from the model's: another size, or any id whose
 * piece differs. Throws DraftModelError naming the first difference.
 */
export async function checkSameVocabulary(draft: { model: LocalModel; tokenizer: TextTokenizer }, target: { model: LocalModel; tokenizer: TextTokenizer }): Promise<void> {
  const size = (m: LocalModel) => m.checkpoint.config.vocabSize;
  const name = (m: LocalModel) => path.basename(m.directory);
  if (size(draft.model) !== size(target.model)) {
    throw new DraftModelError(`the draft model ${name(draft.model)} has a vocabulary of ${size(draft.model)} tokens, the model ${name(target.model)} one of ${size(target.model)}: a draft model must use the model's tokenizer`);
  }
  const files = await Promise.all([draft.model, target.model].map((m) => readFile(path.join(m.directory, 'tokenizer.json')).catch(() => undefined)));
  if (files[0] && files[1] && Buffer.compare(files[0], files[1]) === 0) return; // the same tokenizer.json
  for (let id = 0; id < size(target.model); id++) {
    const mine = target.tokenizer.decode([id]);
    const theirs = draft.tokenizer.decode([id]);
    if (mine !== theirs) {
      throw new DraftModelError(`the draft model ${name(draft.model)} has another vocabulary: token ${id} is ${JSON.stringify(theirs)} there and ${JSON.stringify(mine)} in ${name(target.model)}; a draft model must use the model's tokenizer`);
    }
  }
}

export async function loadDraftModel(spec: string, target: { model: LocalModel; tokenizer: TextTokenizer }, options: DraftModelOptions): Promise<LoadedDraftModel> {
  let resolved;
  try {
    resolved = await resolveModel(spec);
  } catch (error) {
    throw new DraftModelError(`--draft-model: ${error instanceof Error ? error.message.replace(/^--model /, '') : String(error)}`, { cause: error });
  }
  const model = await openLocalModel(resolved.dir);
  const tokenizer = await loadTokenizer(resolved.dir);
  await checkSameVocabulary({ model, tokenizer }, target);
  const { config } = model.checkpoint;
  const loader = await nodeLoaderOptions({ device: options.device, dtype: options.dtype, threads: options.threads });
  // The draft model is served in its default format (the float one of the dtype; q4 when pre-quantized).
  const weights = resolveWeightSpec(config, options.dtype);
  const embedding = await getShardArtifact(model.checkpoint, model.key, { kind: 'embedding' }, options.dtype, weights);
  const headArtifact = await getShardArtifact(model.checkpoint, model.key, { kind: 'head' }, options.dtype, weights);
  const head = await loadHeadRunner(config, embedding.artifact, headArtifact.artifact, model.checkpoint.source, loader);
  const service = new WorkerShardService({ loader: { kind: 'local', modelDir: model.directory, device: options.device, threads: options.threads }, memoryBudgetBytes: options.memoryBudgetBytes ?? 2 ** 30 }, options.log);
  const range = { start: 0, end: config.numLayers };
  const link = new InProcessLink(service);
  try {
    const ready = await link.control({ kind: 'assign', modelKey: model.key, model: resolved.id, range, dtype: options.dtype, weights, artifactUrl: '/local', config: configSummary(model) });
    if (ready.kind !== 'ready') throw new DraftModelError(`the draft model's layers did not load (answered '${ready.kind}')`);
  } catch (error) {
    await service.dispose();
    await head.dispose();
    throw error;
  }
  options.log?.(`draft model ${resolved.id} (${config.numLayers} layers) drafts for speculative decoding on ${head.device}`);
  return {
    id: resolved.id,
    model,
    head,
    link,
    range,
    vocabSize: config.vocabSize,
    async dispose() {
      await link.close('the head is shutting down');
      await service.dispose();
      await head.dispose();
    },
  };
}
