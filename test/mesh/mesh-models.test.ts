/**
 * Every MeshModel runs the conformance suite (test/suites/mesh-model.suite.ts): the Node
 * head's (src/node/mesh-model.ts) over stories260k in fp32 and q4, and aidreams260k in fp16.
 */
import { afterAll, beforeAll } from 'vitest';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';
import { openLocalModel, type LocalModel } from '../../src/node/local-model.ts';
import { meshModel } from '../../src/node/mesh-model.ts';
import { AIDREAMS_DIR, STORIES_DIR, tempDir } from '../engine/harness.ts';
import { meshModelSuite } from '../suites/mesh-model.suite.ts';

let root: { dir: string; remove: () => Promise<void> };
const models: Record<string, LocalModel> = {};
beforeAll(async () => {
  root = await tempDir('mesh-models');
  process.env.MESHNET_HOME = root.dir;
  models.stories = await openLocalModel(STORIES_DIR);
  models.aidreams = await openLocalModel(AIDREAMS_DIR);
});
afterAll(() => root.remove());

/** The checkpoint's shape as its config.json gives it. */
const shape = ({ checkpoint: { config: c } }: LocalModel) => ({
  architecture: c.architecture,
  numLayers: c.numLayers,
  hiddenSize: c.hiddenSize,
  numHeads: c.numHeads,
  numKvHeads: c.numKvHeads,
  headDim: c.headDim,
  vocabSize: c.vocabSize,
});

meshModelSuite('stories260k, fp32', async () => ({
  model: meshModel(models.stories, 'stories260k', 'fp32', weightSpec('fp32')),
  expected: { name: 'stories260k', config: shape(models.stories), weightFormat: 'fp32' },
}));
meshModelSuite('stories260k, q4', async () => ({
  model: meshModel(models.stories, 'tiny', 'fp32', weightSpec('fp32', { format: 'q4', blockSize: 32, accuracyLevel: 4 })),
  expected: { name: 'tiny', config: shape(models.stories), weightFormat: 'q4' },
}));
meshModelSuite('aidreams260k, fp16', async () => ({
  model: meshModel(models.aidreams, 'aidreams', 'fp16', weightSpec('fp16')),
  expected: { name: 'aidreams', config: shape(models.aidreams), weightFormat: 'fp16' },
}));
