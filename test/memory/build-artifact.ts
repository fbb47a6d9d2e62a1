/**
 * Child process for the build memory check: builds the artifact of layers [START, END) of
 * the checkpoint in DIR in weight format WEIGHTS (graph and packed weights.bin) and prints one
 * JSON line `{ rssBefore, peakDuringBuild, ... }` (bytes). The peak is Linux's VmHWM, reset
 * (`/proc/self/clear_refs` ← 5) just before the build, so it covers the build alone.
 *
 *   node --expose-gc --import tsx test/memory/build-artifact.ts DIR START END WEIGHTS
 *
 * Set MESHNET_HOME to a scratch folder: the artifact is built there.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { parseWeightSpecName } from '../../src/core/model/quant/weight-format.ts';
import { getShardArtifact } from '../../src/node/artifact-cache.ts';
import { openLocalModel } from '../../src/node/local-model.ts';

const [directory, startText, endText, weightsText] = process.argv.slice(2);
const weights = weightsText ? parseWeightSpecName(weightsText) : undefined;
if (!directory || startText === undefined || endText === undefined || !weights) {
  console.error('usage: build-artifact.ts DIR START END WEIGHTS');
  process.exit(2);
}
const range = { start: Number(startText), end: Number(endText) };
const peakRss = async () => Number(/VmHWM:\s+(\d+) kB/.exec(await readFile('/proc/self/status', 'utf8'))![1]) * 1024;

const model = await openLocalModel(directory);
for (let i = 0; i < 3; i++) {
  globalThis.gc?.();
  await new Promise((resolve) => setTimeout(resolve, 20));
}
const rssBefore = process.memoryUsage().rss;
await writeFile('/proc/self/clear_refs', '5');
const { artifact, cached } = await getShardArtifact(model.checkpoint, model.key, { kind: 'layers', range }, 'fp32', weights);
const peakDuringBuild = await peakRss();
console.log(JSON.stringify({ range, weights: weightsText, cached, rssBefore, peakDuringBuild, weightsBytes: artifact.manifest.weightsLength }));
