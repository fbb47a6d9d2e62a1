/**
 * Child process for the shard memory check: loads the shard executor for layers
 * [START, END) of the checkpoint in DIR on onnxruntime-node's CPU provider, in weight format
 * WEIGHTS (a canonical name such as `fp32` or `q4-b32-acc4`, default fp32), runs one forward
 * step so every weight is really touched, and prints one JSON line
 * `{ rssBefore, rssAfter, ... }` (bytes) on stdout.
 *
 *   node --expose-gc --import tsx test/memory/load-shard.ts DIR START END [WEIGHTS]
 *
 * Set MESHNET_HOME to a scratch folder: the shard artifact is built there.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { getShardArtifact } from '../../src/node/artifact-cache.ts';
import { openLocalModel } from '../../src/node/local-model.ts';
import { nodeLoaderOptions } from '../../src/node/ort-node-runtime.ts';
import { KvState } from '../../src/core/runtime/kv-state.ts';
import { loadShardExecutor } from '../../src/core/runtime/ort-loader.ts';
import { parseWeightSpecName } from '../../src/core/model/quant/weight-format.ts';

const [directory, startText, endText, weightsText = 'fp32'] = process.argv.slice(2);
const weights = parseWeightSpecName(weightsText);
if (!directory || startText === undefined || endText === undefined || !weights) {
  console.error('usage: load-shard.ts DIR START END [WEIGHTS]');
  process.exit(2);
}
const range = { start: Number(startText), end: Number(endText) };

/** Collect garbage (when run with --expose-gc) and give the allocator a moment to return pages. */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// Everything that is not the shard itself happens before the first measurement: module
// loading (onnxruntime-node's native binding included), opening the checkpoint header,
// and building the shard artifact into the cache (the graph and the packed `weights.bin`,
// done once per model, range and format).
const model = await openLocalModel(directory);
const loader = await nodeLoaderOptions({ device: 'cpu', dtype: 'fp32', threads: 1 });
const { artifact } = await getShardArtifact(model.checkpoint, model.key, { kind: 'layers', range }, 'fp32', weights);
await settle();
const rssBefore = process.memoryUsage().rss;
// Peak resident memory from here on (Linux VmHWM, reset by writing 5 to clear_refs).
await writeFile('/proc/self/clear_refs', '5').catch(() => undefined);

const executor = await loadShardExecutor(model.checkpoint.config, artifact, model.checkpoint.source, loader);
const { hiddenSize } = model.checkpoint.config;
const tokens = 4;
const hidden = new Float32Array(tokens * hiddenSize).map((_, i) => Math.sin(i) * 0.1); // [1, tokens, hidden]
const kv = new KvState('memory-check', range, executor.kvOps);
const out = await executor.run({ sessionId: 'memory-check', startPosition: 0, hidden: { dtype: 'fp32', data: hidden, tokens, hiddenSize } }, kv);
if (!out.data.every(Number.isFinite)) throw new Error('the shard produced non-finite activations');
await settle();
const rssAfter = process.memoryUsage().rss;
const peakRss = Number(/VmHWM:\s+(\d+) kB/.exec(await readFile('/proc/self/status', 'utf8'))?.[1] ?? 0) * 1024;

console.log(
  JSON.stringify({
    range,
    rssBefore,
    rssAfter,
    peakRss,
    weights: weightsText,
    weightsBytes: artifact.manifest.weightsLength,
    kvBytes: kv.bytes,
    device: executor.device,
  }),
);
kv.dispose();
await executor.dispose();
