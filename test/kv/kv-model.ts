/** The small model the long-context KV tests share, made in the test file's own temporary home. */
import { afterAll, beforeAll } from 'vitest';
import type { LocalModel } from '../../src/node/local-model.ts';
import { fixtureModel, tempDir } from '../engine/harness.ts';
import { TINY_PRESETS } from '../fixtures/checkpoints.ts';

/**
 * A random 2-layer Llama (hidden 32, 4 query and 2 KV heads, vocabulary 96) written under a new
 * MESHNET_HOME before the file's tests and removed after: `model`, and `home` (its checkpoint
 * sits at `home/name`).
 */
export function useKvModel(name: string, seed: number, maxPositionEmbeddings: number): { readonly model: LocalModel; readonly home: string } {
  let root: { dir: string; remove: () => Promise<void> } | undefined;
  let model: LocalModel | undefined;
  beforeAll(async () => {
    root = await tempDir(`kv-${name}`);
    process.env.MESHNET_HOME = root.dir;
    model = await fixtureModel(root.dir, name, { ...TINY_PRESETS.llama, dtype: 'F32', seed, hiddenSize: 32, numHeads: 4, numKvHeads: 2, intermediateSize: 48, numLayers: 2, vocabSize: 96, maxPositionEmbeddings });
  });
  afterAll(() => root?.remove());
  return {
    get model() {
      return model!;
    },
    get home() {
      return root!.dir;
    },
  };
}
