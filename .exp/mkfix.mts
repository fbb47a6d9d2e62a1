import { writeTinyCheckpoint, TINY_PRESETS } from '/work/wt/issue-17/test/fixtures/checkpoints.ts';
await writeTinyCheckpoint('/tmp/fix17', { ...TINY_PRESETS.llama, dtype: 'F32', seed: 17, hiddenSize: 32, numHeads: 4, numKvHeads: 2, intermediateSize: 48, numLayers: 1, vocabSize: 96, maxPositionEmbeddings: 1536 });
