/**
 * What the head's embedding and LM head cost in resident memory (issue #24: "hold the tied
 * embedding's q4 bytes once"): loads the embedding and head graphs of the checkpoint in DIR
 * in weight format WEIGHTS (CPU, 1 thread), embeds TOKENS distinct ids and runs the LM head
 * once per token, and prints one JSON line: packed bytes of each part, RssAnon growth after
 * loading and after the run, and each part's weights.bin pages resident (mapped, not copied).
 *
 *   node --expose-gc --import tsx bench/head-memory-child.ts DIR WEIGHTS [TOKENS]
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseWeightSpecName } from '../src/core/model/quant/weight-format.ts';
import { loadHeadRunner } from '../src/core/runtime/ort-loader.ts';
import { cachedArtifactDirectory, getShardArtifact } from '../src/node/artifact-cache.ts';
import { openLocalModel } from '../src/node/local-model.ts';
import { nodeLoaderOptions } from '../src/node/ort-node-runtime.ts';

const [directory, weightsText, tokensText = '64'] = process.argv.slice(2);
const weights = weightsText ? parseWeightSpecName(weightsText) : undefined;
if (!directory || !weights) {
  console.error('usage: head-memory-child.ts DIR WEIGHTS [TOKENS]');
  process.exit(2);
}
const settle = async () => {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};
const status = async (key: string) => Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(await readFile('/proc/self/status', 'utf8'))?.[1] ?? 0) * 1024;
/** Resident bytes of the mappings of `file` (/proc/self/smaps). */
async function mappedResident(file: string): Promise<number> {
  let total = 0;
  let inside = false;
  for (const line of (await readFile('/proc/self/smaps', 'utf8')).split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inside = line.endsWith(file);
    else if (inside && line.startsWith('Rss:')) total += Number(/(\d+)/.exec(line)![1]) * 1024;
  }
  return total;
}

const model = await openLocalModel(directory);
const loader = await nodeLoaderOptions({ device: 'cpu', dtype: 'fp32', threads: 1 });
const embedding = (await getShardArtifact(model.checkpoint, model.key, { kind: 'embedding' }, 'fp32', weights)).artifact;
const head = (await getShardArtifact(model.checkpoint, model.key, { kind: 'head' }, 'fp32', weights)).artifact;
const files = { embedding: path.join(cachedArtifactDirectory(embedding), 'weights.bin'), head: path.join(cachedArtifactDirectory(head), 'weights.bin') };
await settle();
const anonBefore = await status('RssAnon');
const runner = await loadHeadRunner(model.checkpoint.config, embedding, head, model.checkpoint.source, loader);
await settle();
const anonLoaded = await status('RssAnon');
const mappedLoaded = { embedding: await mappedResident(files.embedding), head: await mappedResident(files.head) };
const tokens = Number(tokensText);
const { vocabSize } = model.checkpoint.config;
for (let i = 0; i < tokens; i++) {
  const hidden = await runner.embed([(i * 7919) % vocabSize]);
  await runner.logits(hidden);
}
await settle();
console.log(
  JSON.stringify({
    weights: weightsText,
    embeddingBytes: embedding.manifest.weightsLength,
    headBytes: head.manifest.weightsLength,
    anonLoaded: anonLoaded - anonBefore,
    anonRun: (await status('RssAnon')) - anonBefore,
    mappedLoaded,
    mappedRun: { embedding: await mappedResident(files.embedding), head: await mappedResident(files.head) },
  }),
);
