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
    variants: { type: 'string', default: 'default,no-pattern,no-arena-no-pattern,in-place,glibc,no-arena-glibc,in-place-glibc,in-place-no-arena-glibc' },
    rounds: { type: 'string', default: '2' },
    decode: { type: 'string', default: '32' },
    chunk: { type: 'string', default: '128' }, // the executor runs at most MAX_RUN_POSITIONS (128) a run anyway
    env: { type: 'string', default: '' },
  },
});
const dir = await generateCheckpoint(path.join(BENCH, '.cache', 'smollm2-135m-shaped'));
const env = { ...process.env, ...Object.fromEntries(values.env.split(',').filter(Boolean).map((kv) => kv.split('=') as [string, string])) };
const MiB = 2 ** 20;

interface Stage {
  readonly anon: number;
  readonly file: number;
  readonly heapTotal: number;
  readonly arrayBuffers: number;
}
interface Report {
  readonly weightsBytes: number;
  readonly kvBytes: number;
  readonly rssBefore: number;
  readonly peakRss: number;
  readonly stages: Record<'before' | 'loaded' | 'prefilled' | 'decoded', Stage>;
  readonly weightsMappedLoaded: number;
  readonly weightsMappedDecoded: number;
  readonly decodeCpuMicrosPerStep: number;
  readonly decodeFaultsPerStep: number;
  readonly prefillCpuMicros: number;
}

const results = new Map<string, Report[]>();
for (let round = 0; round < Number(values.rounds); round++) {
  for (const weights of values.weights.split(',')) {
    for (const variant of values.variants.split(',')) {
      const childEnv = { ...env, ...PEER_MEMORY_VARIANTS[variant]?.env };
      const { stdout } = await run(process.execPath, ['--expose-gc', '--import', 'tsx', path.join(BENCH, 'peer-memory-child.ts'), dir, '0', values.layers, weights, variant, values.decode, values.chunk], { env: childEnv, maxBuffer: 1 << 20 });
      const report = JSON.parse(stdout.trim().split('\n').at(-1)!) as Report;
      const key = `${weights} | ${variant}`;
      results.set(key, [...(results.get(key) ?? []), report]);
      console.error(`round ${round + 1}: ${key}: decode CPU ${(report.decodeCpuMicrosPerStep / 1000).toFixed(2)} ms/step, load ${os.loadavg()[0].toFixed(1)}`);
    }
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mib = (bytes: number) => (bytes / MiB).toFixed(1);
/** The issue's limits: q4 (and q8) ≤ 1.2 × packed + 30 MiB, fp32 ≤ 1.1 × packed. */
const limit = (weights: string, packed: number) => (weights.startsWith('fp32') ? 1.1 * packed : 1.2 * packed + 30 * MiB);
console.log(`SmolLM2-135M-shaped, layers [0, ${values.layers}), 1 thread, prefill 512 positions in runs of ${values.chunk}, ${values.decode} decode steps; ${values.rounds} rounds, medians; load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}${values.env ? `; env ${values.env}` : ''}`);
console.log('');
console.log('Growth is counted from after onnxruntime-node is imported (its library mapped, no session yet): RssAnon growth + the pages of weights.bin it keeps mapped, after');
console.log('the decode steps. Not in it: libonnxruntime\'s code pages (file-backed, shared by every onnxruntime process; "code" column). "V8 heap" is the JS heap\'s own change');
console.log('(garbage not yet collected moves it by ±15 MiB; it is inside the anon figures). "beyond KV" takes out the KV pool (the peer\'s KV budget covers it).');
console.log('');
console.log('| weights | settings | packed MiB | KV MiB | anon: loaded / prefilled / decoded | V8 heap | weights mapped | **growth** | beyond KV | limit | code | peak (VmHWM) | decode CPU ms/step | faults/step | prefill CPU ms |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const [key, reports] of results) {
  const [weights, variant] = key.split(' | ');
  const m = (f: (r: Report) => number) => median(reports.map(f));
  const anon = (stage: 'loaded' | 'prefilled' | 'decoded') => mib(m((r) => r.stages[stage].anon - r.stages.before.anon));
  const growth = m((r) => r.stages.decoded.anon - r.stages.before.anon + r.weightsMappedDecoded);
  const packed = reports[0]!.weightsBytes;
  const kv = reports[0]!.kvBytes;
  console.log(
    `| ${weights} | ${variant} | ${mib(packed)} | ${mib(kv)} | ${anon('loaded')} / ${anon('prefilled')} / ${anon('decoded')} | ${mib(m((r) => r.stages.decoded.heapTotal - r.stages.before.heapTotal))} | ${mib(m((r) => r.weightsMappedDecoded))} | **${mib(growth)}** | ${mib(growth - kv)} | ${mib(limit(weights!, packed))} | ${mib(m((r) => r.stages.decoded.file - r.stages.before.file - r.weightsMappedDecoded))} | ${mib(m((r) => r.peakRss - r.rssBefore))} | ${(m((r) => r.decodeCpuMicrosPerStep) / 1000).toFixed(2)} | ${m((r) => r.decodeFaultsPerStep).toFixed(0)} | ${(m((r) => r.prefillCpuMicros) / 1000).toFixed(0)} |`,
  );
}
