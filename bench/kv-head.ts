/**
 * The head's LM head on the SmolLM2-shaped bench model (49,152-token vocabulary): one
 * session's logits against one batched run for B sessions (BatchingHeadRunner's unit), 1
 * thread, median ms. With batched decode on the peers, this is the head's part of every
 * step.
 *
 *   node --import tsx bench/kv-head.ts [runs=20]
 */
import os from 'node:os';
import path from 'node:path';
import { loadLocalPipeline, openLocalModel } from '../src/node/local-model.ts';
import { generateCheckpoint } from './generate-checkpoint.ts';
import { median } from './requests.ts';

const RUNS = Number(process.argv[2] ?? 20);
process.env.MESHNET_HOME ??= path.join(import.meta.dirname, '.cache', 'home');
const model = await openLocalModel(await generateCheckpoint(path.join(import.meta.dirname, '.cache', 'smollm2-135m-shaped')));
const p = await loadLocalPipeline(model, { ranges: [{ start: 0, end: 1 }], device: 'cpu', dtype: 'fp32', threads: 1 });
const hidden = await p.head.embed([42]);
const time = async (run: () => Promise<unknown>) => {
  const ms: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await run();
    ms.push(performance.now() - started);
  }
  return median(ms);
};
const rows: string[] = [];
const alone = await time(() => p.head.logits(hidden));
rows.push(`| 1 | ${alone.toFixed(2)} | ${alone.toFixed(2)} |`);
for (const batch of [2, 4, 8]) {
  const ms = await time(() => p.head.logitsBatch!(Array.from({ length: batch }, () => hidden)));
  rows.push(`| ${batch} | ${ms.toFixed(2)} | ${(ms / batch).toFixed(2)} |`);
}
const embed = await time(() => p.head.embed([42]));
process.stdout.write(
  [
    `LM head, vocabulary ${model.checkpoint.config.vocabSize}, hidden ${model.checkpoint.config.hiddenSize}, 1 thread, median of ${RUNS}; embedding one token ${embed.toFixed(2)} ms; load ${os.loadavg()[0].toFixed(1)}`,
    '',
    '| sessions | ms per run | ms per session |',
    '| --- | --- | --- |',
    ...rows,
    '',
  ].join('\n'),
);
await p.dispose();
process.exit(0);
