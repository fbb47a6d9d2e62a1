/**
 * Per-step cost of one decode position against the context length, per runtime and KV mode,
 * on a SmolLM2-shaped shard of a few layers (hidden 576, 9/3 heads, head size 64): what the
 * KV pool saves on onnxruntime-node's CPU provider and on onnxruntime-web's wasm (whose
 * inputs are copied into the wasm heap on every run), against the unpooled path (every
 * step feeds the past and fetches the whole present back); and the pool's attention read in
 * place (plain ops, issue 24) against GroupQueryAttention (which copies the past into a
 * present buffer every step).
 *
 * Then, on CPU with the pool, what one batched run of B sessions' decode steps costs against
 * one session's step: the bound on batched decode's aggregate speed-up at the peers.
 *
 * CPU time (process.cpuUsage, 1 onnxruntime thread) beside the wall clock: on a shared
 * machine the wall clock measures the share of a core the run got.
 *
 *   node --import tsx bench/kv-step.ts [layers=4] [steps=24]
 */
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { loadLocalPipeline, openLocalModel } from '../src/node/local-model.ts';
import { writeTinyCheckpoint } from '../test/fixtures/checkpoints.ts';
import { median } from './requests.ts';

const [layersArg = '4', stepsArg = '24'] = process.argv.slice(2);
const dir = path.join(import.meta.dirname, '.cache', `kv-step-${layersArg}`);
process.env.MESHNET_HOME ??= path.join(import.meta.dirname, '.cache', 'home');
await writeTinyCheckpoint(dir, {
  architecture: 'LlamaForCausalLM',
  dtype: 'F32',
  tied: true,
  seed: 3,
  hiddenSize: 576,
  numHeads: 9,
  numKvHeads: 3,
  intermediateSize: 1536,
  numLayers: Number(layersArg),
  vocabSize: 256,
  maxPositionEmbeddings: 8192,
});
const model = await openLocalModel(dir);
const ranges = [{ start: 0, end: model.checkpoint.config.numLayers }];
const rows: string[] = [];
const variants = [
  { kvMode: 'pool', attention: 'in-place' },
  { kvMode: 'pool', attention: 'gqa' },
  { kvMode: 'replace', attention: 'gqa' },
] as const;
for (const device of ['cpu', 'wasm']) {
  for (const { kvMode, attention } of variants) {
    const p = await loadLocalPipeline(model, { ranges, device, dtype: 'fp32', threads: 1, kvMode, ...(attention === 'in-place' ? { attention } : {}) });
    const stage = p.stages[0];
    const perContext: number[] = [];
    const cpuPerContext: number[] = [];
    for (const context of [32, 2048]) {
      const sessionId = randomUUID();
      let hidden = await p.head.embed(Array.from({ length: context }, (_, i) => 1 + (i % 250)));
      await stage.executor.run({ sessionId, startPosition: 0, hidden }, stage.kv.acquire(sessionId, stage.executor.range));
      hidden = await p.head.embed([7]);
      const times: number[] = [];
      const cpu: number[] = [];
      for (let s = 0; s < Number(stepsArg); s++) {
        const started = performance.now();
        const cpuStarted = process.cpuUsage();
        await stage.executor.run({ sessionId, startPosition: context + s, hidden }, stage.kv.find(sessionId, stage.executor.range)!);
        const used = process.cpuUsage(cpuStarted);
        cpu.push((used.user + used.system) / 1000);
        times.push(performance.now() - started);
      }
      stage.kv.release(sessionId);
      perContext.push(median(times));
      cpuPerContext.push(median(cpu));
    }
    const [c32, c2048] = cpuPerContext;
    rows.push(`| ${device} | ${kvMode} | ${attention} | ${perContext[0].toFixed(2)} | ${perContext[1].toFixed(2)} | ${c32.toFixed(2)} | ${c2048.toFixed(2)} | ${(c32 / c2048).toFixed(2)} |`);
    await p.dispose();
  }
}
const batchRows: string[] = [];
{
  const p = await loadLocalPipeline(model, { ranges, device: 'cpu', dtype: 'fp32', threads: 1, kvMode: 'pool' });
  const { executor, kv } = p.stages[0];
  const context = 32;
  let alone = 0;
  for (const batch of [1, 2, 4, 8]) {
    const ids = Array.from({ length: batch }, () => randomUUID());
    for (const sessionId of ids) {
      const hidden = await p.head.embed(Array.from({ length: context }, (_, i) => 1 + (i % 250)));
      await executor.run({ sessionId, startPosition: 0, hidden }, kv.acquire(sessionId, executor.range));
    }
    const hidden = await p.head.embed([7]);
    const times: number[] = [];
    for (let s = 0; s < Number(stepsArg); s++) {
      const steps = ids.map((sessionId) => ({ sessionId, startPosition: context + s, hidden }));
      const started = performance.now();
      await executor.batch!.run(steps, ids.map((id) => kv.find(id, executor.range)!));
      times.push(performance.now() - started);
    }
    for (const id of ids) kv.release(id);
    const ms = median(times);
    if (batch === 1) alone = ms;
    batchRows.push(`| ${batch} | ${ms.toFixed(2)} | ${((batch * alone) / ms).toFixed(2)}× |`);
  }
  await p.dispose();
}
process.stdout.write(
  [
    `${layersArg} SmolLM2-shaped layers, 1 thread, median of ${stepsArg} decode steps; load ${os.loadavg()[0].toFixed(1)}`,
    '',
    '| runtime | KV | attention | wall ms/step at 32 | wall ms at 2,048 | CPU ms/step at 32 | CPU ms at 2,048 | CPU-time speed at 2,048 ÷ at 32 |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
    '',
    'CPU, pool, 32-position sessions: one batched run of B decode steps',
    '',
    '| B | ms/run | tokens per ms ÷ one session alone |',
    '| --- | --- | --- |',
    ...batchRows,
    '',
  ].join('\n'),
);
process.exit(0);
