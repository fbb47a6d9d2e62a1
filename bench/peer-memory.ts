/**
 * A peer's memory against what it holds (issue #24), under onnxruntime's memory settings:
 * each (weights, settings) pair runs in a child of its own (`peer-memory-child.ts`), rounds
 * interleaved, and the table shows each one's resident growth (RssAnon, and the weights file
 * pages it keeps mapped) after loading the shard, after a 512-position prefill and after the
 * decode steps, the peak (VmHWM) over the whole child, and the CPU time per decode step
 * (process.cpuUsage over every thread: other load on a shared machine inflates it far less
 * than wall time). Medians over rounds.
 *
 *   node --import tsx bench/peer-memory.ts [--layers 15] [--weights q4-b32-acc4,fp32]
 *     [--variants default,no-prepack,...] [--rounds 2] [--decode 32] [--chunk 512] [--env K=V,...]
 *
 * The checkpoint is the SmolLM2-135M-shaped one in bench/.cache (written on first use);
 * 15 layers is one of two peers' halves. `--env` adds environment variables to every child
 * (e.g. glibc's MALLOC_MMAP_THRESHOLD_). Set MESHNET_HOME (the artifacts are built there).
 */
import { execFile } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { generateCheckpoint } from './generate-checkpoint.ts';
import { PEER_MEMORY_VARIANTS } from './peer-memory-variants.ts';

const run = promisify(execFile);
const BENCH = import.meta.dirname;
const { values } = parseArgs({
  options: {
    layers: { type: 'string', default: '15' },
    weights: { type: 'string', default: 'q4-b32-acc4,fp32' },
    variants: { type: 'string', default: Object.keys(PEER_MEMORY_VARIANTS).join(',') },
    rounds: { type: 'string', default: '2' },
    decode: { type: 'string', default: '32' },
    chunk: { type: 'string', default: '512' },
    env: { type: 'string', default: '' },
  },
});
const dir = await generateCheckpoint(path.join(BENCH, '.cache', 'smollm2-135m-shaped'));
const env = { ...process.env, ...Object.fromEntries(values.env.split(',').filter(Boolean).map((kv) => kv.split('=') as [string, string])) };
const MiB = 2 ** 20;

interface Report {
  readonly weightsBytes: number;
  readonly kvBytes: number;
  readonly rssBefore: number;
  readonly peakRss: number;
  readonly stages: Record<'before' | 'loaded' | 'prefilled' | 'decoded', { anon: number; file: number }>;
  readonly weightsMappedDecoded: number;
  readonly decodeCpuMicrosPerStep: number;
  readonly prefillCpuMicros: number;
}

const results = new Map<string, Report[]>();
for (let round = 0; round < Number(values.rounds); round++) {
  for (const weights of values.weights.split(',')) {
    for (const variant of values.variants.split(',')) {
      const { stdout } = await run(process.execPath, ['--expose-gc', '--import', 'tsx', path.join(BENCH, 'peer-memory-child.ts'), dir, '0', values.layers, weights, variant, values.decode, values.chunk], { env, maxBuffer: 1 << 20 });
      const report = JSON.parse(stdout.trim().split('\n').at(-1)!) as Report;
      const key = `${weights} | ${variant}`;
      results.set(key, [...(results.get(key) ?? []), report]);
      console.error(`round ${round + 1}: ${key}: decode CPU ${(report.decodeCpuMicrosPerStep / 1000).toFixed(2)} ms/step, load ${os.loadavg()[0].toFixed(1)}`);
    }
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mib = (bytes: number) => (bytes / MiB).toFixed(1);
console.log(`SmolLM2-135M-shaped, layers [0, ${values.layers}), 1 thread, prefill ${values.chunk === '512' ? '512 positions' : `512 positions in runs of ${values.chunk}`}, ${values.decode} decode steps; ${values.rounds} rounds, medians; load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}${values.env ? `; env ${values.env}` : ''}`);
console.log('| weights | settings | packed MiB | KV MiB | anon growth: loaded / prefilled / decoded (MiB) | weights file mapped (MiB) | peak growth (MiB) | peak ÷ packed | decode CPU ms/step | prefill CPU ms |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const [key, reports] of results) {
  const [weights, variant] = key.split(' | ');
  const m = (f: (r: Report) => number) => median(reports.map(f));
  const anon = (stage: 'loaded' | 'prefilled' | 'decoded') => mib(m((r) => r.stages[stage].anon - r.stages.before.anon));
  const peak = m((r) => r.peakRss - r.rssBefore);
  console.log(
    `| ${weights} | ${variant} | ${mib(reports[0]!.weightsBytes)} | ${mib(reports[0]!.kvBytes)} | ${anon('loaded')} / ${anon('prefilled')} / ${anon('decoded')} | ${mib(m((r) => r.weightsMappedDecoded))} | ${mib(peak)} | ${(peak / reports[0]!.weightsBytes).toFixed(2)} | ${(m((r) => r.decodeCpuMicrosPerStep) / 1000).toFixed(2)} | ${(m((r) => r.prefillCpuMicros) / 1000).toFixed(0)} |`,
  );
}
