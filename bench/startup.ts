/**
 * Start-up time of the `meshnet` command, from the TypeScript sources through tsx (how every
 * start ran before the package was built: issue #28) and from the built JavaScript (dist/,
 * what the installed package runs), in one run, rounds interleaved:
 *
 * - `meshnet --help`: spawn to exit;
 * - `meshnet serve --local-peers 2 --port 0` (the demo model, artifacts already cached):
 *   spawn to the first 200 from /health (the head serves alone), then to both local peers'
 *   "loaded layers" line (the mesh of `npm start` is up), then the first `/peer/app.js` (the
 *   browser peer's bundle: esbuild at first request from the sources, a file from dist/).
 *
 * tsx caches what it compiled under the temporary folder: "cold" runs each round with an
 * empty one (the first start after an install), "warm" with one an earlier start filled.
 * `--before DIR` adds the same rows for another checkout's own `bin/meshnet.js` (e.g. a git
 * worktree of the commit before the build existed, its node_modules linked to this one's).
 *
 *   npm run bench:startup [-- --rounds N --before DIR]
 *
 * Needs a fresh `npm run build`. Writes bench/results/startup-<timestamp>.json and .md (and
 * results/startup-latest.md).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { staleReason } from '../scripts/build-info.mjs';
import { median } from './requests.ts';

const BENCH = import.meta.dirname;
const ROOT = path.resolve(BENCH, '..');
const BIN = path.join(ROOT, 'bin', 'meshnet.js');
const { values } = parseArgs({ options: { rounds: { type: 'string' }, before: { type: 'string' } } });
const ROUNDS = Number(values.rounds ?? 3);

interface Runner {
  readonly mode: string;
  readonly bin: string;
  /** MESHNET_RUN for this checkout's bin; none for --before's. */
  readonly run?: 'source' | 'dist';
  /** An empty tsx cache for every measurement. */
  readonly cold: boolean;
}

const RUNNERS: Runner[] = [
  ...(values.before
    ? [
        { mode: 'before: tsx cold', bin: path.resolve(values.before, 'bin', 'meshnet.js'), cold: true },
        { mode: 'before: tsx warm', bin: path.resolve(values.before, 'bin', 'meshnet.js'), cold: false },
      ]
    : []),
  { mode: 'sources: tsx cold', bin: BIN, run: 'source', cold: true },
  { mode: 'sources: tsx warm', bin: BIN, run: 'source', cold: false },
  { mode: 'dist', bin: BIN, run: 'dist', cold: false },
];

interface Round {
  readonly mode: string;
  readonly load: number;
  readonly helpMs: number;
  readonly healthMs: number;
  readonly meshMs: number;
  readonly peerBundleMs: number;
}

const stale = staleReason(ROOT);
if (stale) throw new Error(`dist/ is not fresh (${stale}): run npm run build first`);
const home = mkdtempSync(path.join(os.tmpdir(), 'meshnet-startup-home-'));
const warmTmp = mkdtempSync(path.join(os.tmpdir(), 'meshnet-startup-tsx-'));

function envFor(runner: Runner, tmp: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, MESHNET_HOME: home, TMPDIR: tmp };
  delete env.MESHNET_RUN;
  return runner.run ? { ...env, MESHNET_RUN: runner.run } : env;
}

function timeHelp(bin: string, env: NodeJS.ProcessEnv): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, '--help'], { env, stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`--help exited ${code}`))));
  });
}

async function timeServe(bin: string, env: NodeJS.ProcessEnv): Promise<{ healthMs: number; meshMs: number; peerBundleMs: number }> {
  const started = performance.now();
  const child = spawn(process.execPath, [bin, 'serve', '--local-peers', '2', '--port', '0'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    let base: string | undefined;
    let healthMs: number | undefined;
    while (performance.now() - started < 120_000) {
      base ??= /API\s+(http:\/\/[\d.:]+)\/v1/.exec(stdout)?.[1];
      if (base && healthMs === undefined && (await fetch(`${base}/health`).catch(() => undefined))?.status === 200) healthMs = performance.now() - started;
      if (healthMs !== undefined && (stderr.match(/loaded layers/g)?.length ?? 0) >= 2) {
        const meshMs = performance.now() - started;
        const asked = performance.now();
        const bundle = await fetch(`${base}/peer/app.js`);
        await bundle.text();
        if (bundle.status !== 200) throw new Error(`/peer/app.js answered ${bundle.status}`);
        return { healthMs, meshMs, peerBundleMs: performance.now() - asked };
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error(`serve was not up within 120 s:\n${stderr}`);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

function loadAverage(): number {
  return os.loadavg()[0]!;
}

// Artifacts are built once, outside the measured rounds, and the warm tsx caches filled.
for (const runner of RUNNERS.filter((r) => !r.cold)) await timeServe(runner.bin, envFor(runner, warmTmp));

/** The tsx cache folder for one measurement: an empty one for a cold runner, the filled one otherwise. */
function tmpFor(runner: Runner): { dir: string; done: () => void } {
  if (!runner.cold) return { dir: warmTmp, done: () => {} };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'meshnet-startup-cold-'));
  return { dir, done: () => rmSync(dir, { recursive: true, force: true }) };
}

const rounds: Round[] = [];
for (let round = 0; round < ROUNDS; round++) {
  for (const runner of RUNNERS) {
    const load = loadAverage();
    const forHelp = tmpFor(runner);
    const helpMs = await timeHelp(runner.bin, envFor(runner, forHelp.dir)).finally(forHelp.done);
    const forServe = tmpFor(runner);
    const serve = await timeServe(runner.bin, envFor(runner, forServe.dir)).finally(forServe.done);
    rounds.push({ mode: runner.mode, load, helpMs, ...serve });
    process.stderr.write(`round ${round + 1} ${runner.mode}: --help ${helpMs.toFixed(0)} ms, /health ${serve.healthMs.toFixed(0)} ms, mesh ${serve.meshMs.toFixed(0)} ms, /peer/app.js ${serve.peerBundleMs.toFixed(0)} ms (load ${load.toFixed(1)})\n`);
  }
}
rmSync(home, { recursive: true, force: true });
rmSync(warmTmp, { recursive: true, force: true });

const summary = RUNNERS.map(({ mode }) => {
  const of = rounds.filter((r) => r.mode === mode);
  const m = (key: 'helpMs' | 'healthMs' | 'meshMs' | 'peerBundleMs') => median(of.map((r) => r[key]));
  return { mode, helpMs: m('helpMs'), healthMs: m('healthMs'), meshMs: m('meshMs'), peerBundleMs: m('peerBundleMs') };
});
const dist = summary.find((s) => s.mode === 'dist')!;
const startedAt = new Date().toISOString();
const loads = rounds.map((r) => r.load);
const lines = [
  `# meshnet start-up — ${startedAt}`,
  '',
  `${ROUNDS} rounds, medians; load average ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} on ${os.cpus().length} cores. Ratios: dist ÷ that row.`,
  '',
  '| runs | `meshnet --help` | serve: /health 200 | serve: both peers loaded | first /peer/app.js |',
  '| --- | --- | --- | --- | --- |',
  ...summary.map((s) => {
    const cell = (ms: number, base: number) => `${ms.toFixed(0)} ms${s.mode === 'dist' ? '' : ` (${(base / ms).toFixed(2)}×)`}`;
    return `| ${s.mode} | ${cell(s.helpMs, dist.helpMs)} | ${cell(s.healthMs, dist.healthMs)} | ${cell(s.meshMs, dist.meshMs)} | ${cell(s.peerBundleMs, dist.peerBundleMs)} |`;
  }),
  '',
];
await mkdir(path.join(BENCH, 'results'), { recursive: true });
const stamp = startedAt.replace(/[:.]/g, '-');
await writeFile(path.join(BENCH, 'results', `startup-${stamp}.json`), JSON.stringify({ startedAt, rounds, summary }, null, 1));
await writeFile(path.join(BENCH, 'results', `startup-${stamp}.md`), lines.join('\n'));
await writeFile(path.join(BENCH, 'results', 'startup-latest.md'), lines.join('\n'));
process.stdout.write(lines.join('\n'));
