/**
 * `npm run bench:speculation [-- --quick] [--link-delay-ms 10,20] [--rounds N] [--decode-tokens N]
 * [--only MESH] [--skip-prefill | --prefill-only]`:
 * what speculative decoding and pipelined prefill win back across real sockets, as ratios
 * measured in one run (medians of interleaved rounds; bench/speculation-mesh.ts measures each
 * mesh in a process of its own). Writes bench/results/speculation-<timestamp>.{json,md} and
 * bench/results/speculation-latest.md.
 *
 *   - the mechanism: the SmolLM2-shaped random-weight model over 2 and 3 relay peers at each
 *     link delay, greedy from a 32-token prompt — its output falls into repetition, which
 *     prompt lookup predicts; also the draft-model path with the model drafting for itself
 *     (2 peers: every draft kept, what the machinery costs and gains at best);
 *   - real text: aidreams260k (the demo, trained) over 2 peers, greedy from four prompts, at
 *     0 ms (loopback: the least to win) and at each link delay;
 *   - pipelined prefill: the SmolLM2-shaped model over 2 peers, one thread each, a
 *     1,536-token prompt at +20 ms, sequential against each chunk setting.
 */
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadTokenizer } from '../src/node/tokenizer-files.ts';
import { generateCheckpoint } from './generate-checkpoint.ts';
import { median, promptOf } from './requests.ts';
import type { DecodeSample, MeshResult, MeshSpec, PrefillSample } from './speculation-mesh.ts';

const BENCH = import.meta.dirname;
const CACHE = path.join(BENCH, '.cache');
const AIDREAMS = path.resolve(BENCH, '../test/fixtures/models/aidreams260k');

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    'link-delay-ms': { type: 'string' },
    rounds: { type: 'string' },
    'decode-tokens': { type: 'string' },
    'skip-prefill': { type: 'boolean', default: false },
    'prefill-only': { type: 'boolean', default: false },
    only: { type: 'string' },
  },
});
const quick = values.quick!;
const delays = (values['link-delay-ms'] ?? '10,20').split(',').map(Number);
if (delays.some((d) => !Number.isFinite(d) || d < 0)) throw new Error(`--link-delay-ms: '${values['link-delay-ms']}' is not a list of milliseconds`);
const rounds = Number(values.rounds ?? (quick ? 3 : 5));
const decodeTokens = Number(values['decode-tokens'] ?? (quick ? 64 : 96));
const log = (line: string) => process.stderr.write(`bench: ${line}\n`);

function runMesh(spec: MeshSpec): Promise<MeshResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(BENCH, 'speculation-mesh.ts'), JSON.stringify(spec)], {
      env: { ...process.env, MESHNET_HOME: path.join(CACHE, 'home') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1)!) as MeshResult) : reject(new Error(`speculation-mesh ${spec.name} exited with ${code}`))));
  });
}

const started = performance.now();
const loadAtStart = os.loadavg();
const smol = await generateCheckpoint(path.join(CACHE, 'smollm2-135m-shaped'));
const smolVocab = 49152;
const aidreamsTokenizer = await loadTokenizer(AIDREAMS);
const aidreamsPrompts = ['', '"Hello. ', '"Tell me about the sea. ', '"What do you dream about. '].map((text) => (text === '' ? [1] : aidreamsTokenizer.encode(text)));

const meshes: MeshSpec[] = [
  {
    name: 'smollm2, 2 peers',
    model: smol,
    peers: 2,
    link: 'relay',
    threads: 1,
    rounds,
    draftSelf: true,
    decode: { prompts: [promptOf(32, smolVocab, 2), promptOf(32, smolVocab, 5)], tokens: decodeTokens, modes: ['off', 'ngram', 'draft'], delaysMs: delays },
    ...(values['skip-prefill'] ? {} : { prefill: { promptLength: 1536, chunks: quick ? [0, 'auto'] : [0, 'auto', 128, 256, 384], delayMs: 20 } }),
  },
  { name: 'smollm2, 3 peers', model: smol, peers: 3, link: 'relay', threads: 1, rounds, decode: { prompts: [promptOf(32, smolVocab, 2), promptOf(32, smolVocab, 5)], tokens: decodeTokens, modes: ['off', 'ngram'], delaysMs: delays } },
  { name: 'aidreams260k, 2 peers', model: AIDREAMS, peers: 2, link: 'relay', threads: 1, rounds: rounds * 2, decode: { prompts: aidreamsPrompts, tokens: 96, modes: ['off', 'ngram'], delaysMs: [0, ...delays] } },
];
const results: MeshResult[] = [];
for (const spec of values['prefill-only'] ? meshes.filter((m) => m.prefill).map(({ decode: _, draftSelf: __, ...m }) => m) : meshes) {
  if (values.only && !spec.name.startsWith(values.only)) continue;
  log(`${spec.name}: ${spec.rounds} rounds`);
  results.push(await runMesh(spec));
}

// ---- figures: medians over rounds (each round's figure is the mean over its prompts) ----

interface DecodeRow {
  readonly mesh: string;
  readonly delayMs: number;
  readonly mode: string;
  readonly tokensPerSecond: number;
  readonly perRound: number[];
  readonly acceptance: number;
  readonly tokensPerRoundTrip: number;
  /** This mode's median ÷ no speculation's, same mesh and delay. */
  readonly speedup?: number;
  /** Generated ids equal to the 'off' run of the same prompt and round (greedy: must be true). */
  readonly sameTokens: boolean;
}

function decodeRows(result: MeshResult): DecodeRow[] {
  const rows: DecodeRow[] = [];
  const by = (delay: number, mode: string) => result.decode.filter((d) => d.delayMs === delay && d.mode === mode);
  for (const delayMs of [...new Set(result.decode.map((d) => d.delayMs))]) {
    const off = by(delayMs, 'off');
    const perRoundOf = (samples: DecodeSample[]) => [...new Set(samples.map((s) => s.round))].map((round) => {
      const these = samples.filter((s) => s.round === round);
      return these.reduce((sum, s) => sum + s.tokensPerSecond, 0) / these.length;
    });
    const offMedian = median(perRoundOf(off));
    for (const mode of [...new Set(result.decode.map((d) => d.mode))]) {
      const samples = by(delayMs, mode);
      const perRound = perRoundOf(samples);
      const drafted = samples.reduce((sum, s) => sum + s.drafted, 0);
      const accepted = samples.reduce((sum, s) => sum + s.accepted, 0);
      const tokens = samples.reduce((sum, s) => sum + s.tokens, 0);
      const steps = samples.reduce((sum, s) => sum + s.steps, 0);
      const sameTokens = samples.every((s) => JSON.stringify(s.tokenIds) === JSON.stringify(off.find((o) => o.round === s.round && o.prompt === s.prompt)?.tokenIds));
      rows.push({ mesh: result.spec.name, delayMs, mode, tokensPerSecond: median(perRound), perRound, acceptance: drafted ? accepted / drafted : NaN, tokensPerRoundTrip: tokens / steps, ...(mode === 'off' ? {} : { speedup: median(perRound) / offMedian }), sameTokens });
    }
  }
  return rows;
}

interface PrefillRow {
  readonly chunk: number | 'auto';
  readonly chunks: number;
  readonly ttftMs: number;
  readonly perRound: number[];
  readonly ratio?: number;
  /** Median CPU time of all peers together during the prefill, ms, and of the busiest peer. */
  readonly peerCpuMs: number;
  readonly maxPeerCpuMs: number;
}

function prefillRows(samples: PrefillSample[]): PrefillRow[] {
  const chunksOf = [...new Set(samples.map((s) => String(s.chunk)))];
  const sequential = median(samples.filter((s) => s.chunk === 0).map((s) => s.ttftMs));
  return chunksOf.map((key) => {
    const these = samples.filter((s) => String(s.chunk) === key);
    const ttftMs = median(these.map((s) => s.ttftMs));
    const peerCpuMs = median(these.map((s) => s.peerCpuMs.reduce((a, b) => a + b, 0)));
    const maxPeerCpuMs = median(these.map((s) => Math.max(...s.peerCpuMs)));
    return { chunk: these[0].chunk, chunks: these[0].chunks, ttftMs, perRound: these.map((s) => s.ttftMs), peerCpuMs, maxPeerCpuMs, ...(these[0].chunk === 0 ? {} : { ratio: ttftMs / sequential }) };
  });
}

const decode = results.flatMap(decodeRows);
const prefill = prefillRows(results.flatMap((r) => r.prefill));
const loads = results.flatMap((r) => [...r.decode, ...r.prefill].map((s) => s.loadAverage));

const fmt = (x: number | undefined, digits = 1) => (x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(digits));
const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : '—');
const targets: { target: string; measured: string; met: boolean }[] = [];
for (const row of decode.filter((r) => r.mesh.startsWith('smollm2') && r.mode === 'ngram' && r.delayMs === 20)) {
  targets.push({ target: `${row.mesh}, +20 ms: prompt lookup ≥ 2× no speculation`, measured: `${fmt(row.speedup, 2)}× (${fmt(row.tokensPerSecond)} tok/s, ${pct(row.acceptance)} kept, ${fmt(row.tokensPerRoundTrip, 2)} tok/round trip)`, met: (row.speedup ?? 0) >= 2 });
}
for (const row of decode.filter((r) => r.mesh.startsWith('aidreams') && r.mode === 'ngram')) {
  targets.push({ target: `aidreams260k, +${row.delayMs} ms: adaptive k never > 5% slower than none`, measured: `${fmt(row.speedup, 3)}× (${pct(row.acceptance)} kept, ${fmt(row.tokensPerRoundTrip, 2)} tok/round trip)`, met: (row.speedup ?? 0) >= 0.95 });
}
for (const row of prefill.filter((r) => r.chunk === 'auto')) {
  targets.push({ target: 'pipelined prefill, 1,536 tokens, 2 peers × 1 thread, +20 ms: TTFT ≤ 0.7× sequential', measured: `${fmt(row.ratio, 2)}× (${fmt(row.ttftMs, 0)} ms against ${fmt(prefill.find((p) => p.chunk === 0)?.ttftMs, 0)} ms, ${row.chunks} chunks)`, met: (row.ratio ?? Infinity) <= 0.7 });
}
targets.push({ target: 'greedy output identical with and without speculation (every run)', measured: decode.every((r) => r.sameTokens) ? 'identical' : `differs in ${decode.filter((r) => !r.sameTokens).map((r) => `${r.mesh} ${r.mode} +${r.delayMs}`).join(', ')}`, met: decode.every((r) => r.sameTokens) });

const lines: string[] = [];
const stamp = new Date(Date.now() - (performance.now() - started)).toISOString();
lines.push(`# meshnet speculation bench — ${stamp}${quick ? ' (quick)' : ''}`, '');
lines.push(
  `${os.cpus().length} × ${os.cpus()[0]?.model ?? ''}, Node ${process.version}. Peers are local processes over relay sockets, one onnxruntime thread each; the head holds no layers. ` +
    `Link delay is added round-trip time per frame on the head's side. Decode: greedy, ${decodeTokens} tokens (aidreams 96), tokens/s = (tokens − 1) ÷ (last − first token time), the median over ${rounds} interleaved rounds (aidreams ${rounds * 2}) of each round's mean over its prompts. ` +
    `Load average ${loadAtStart[0].toFixed(1)} at the start, ${fmt(Math.min(...loads))}–${fmt(Math.max(...loads))} during the measurements. Run took ${((performance.now() - started) / 1000).toFixed(0)} s.`,
  '',
);
lines.push('## Targets', '', '| target | measured | met |', '| --- | --- | --- |');
for (const t of targets) lines.push(`| ${t.target} | ${t.measured} | ${t.met ? 'yes' : '**no**'} |`);
if (decode.length > 0) lines.push('', '## Decode', '', '| mesh | link delay | speculation | tok/s (median) | ÷ none | drafts kept | tokens / round trip | same tokens | rounds (tok/s) |', '| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const r of decode) {
  lines.push(`| ${r.mesh} | +${r.delayMs} ms | ${r.mode === 'draft' ? 'draft model (itself)' : r.mode} | ${fmt(r.tokensPerSecond)} | ${r.speedup === undefined ? '1' : fmt(r.speedup, 2)} | ${r.mode === 'off' ? '—' : pct(r.acceptance)} | ${fmt(r.tokensPerRoundTrip, 2)} | ${r.sameTokens ? 'yes' : '**no**'} | ${r.perRound.map((x) => fmt(x)).join(', ')} |`);
}
if (prefill.length > 0) {
  lines.push(
    '',
    '## Pipelined prefill (1,536-token prompt, SmolLM2-shaped, 2 peers × 1 thread, +20 ms)',
    '',
    'Peer CPU is the time both peer processes spent on a CPU during the prefill (/proc); cores used = peer CPU ÷ TTFT. Sequential prefill can use one core at a time; a pipelined one needs the two at once, so with the cores taken by other work (load average above 2) it cannot overlap, and what bounds it is the CPU share the peers get.',
    '',
    '| chunk (tokens) | frames per hop | TTFT (median, ms) | ÷ sequential | peer CPU (ms, both; busiest) | cores used | rounds (ms) |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  );
  for (const r of prefill) lines.push(`| ${r.chunk === 0 ? 'sequential' : r.chunk} | ${r.chunks} | ${fmt(r.ttftMs, 0)} | ${r.ratio === undefined ? '1' : fmt(r.ratio, 2)} | ${fmt(r.peerCpuMs, 0)}; ${fmt(r.maxPeerCpuMs, 0)} | ${fmt(r.peerCpuMs / r.ttftMs, 2)} | ${r.perRound.map((x) => fmt(x, 0)).join(', ')} |`);
}
lines.push('');
const markdown = lines.join('\n');
const dir = path.join(BENCH, 'results');
await mkdir(dir, { recursive: true });
const file = `speculation-${stamp.replace(/[:.]/g, '-')}`;
await writeFile(path.join(dir, `${file}.json`), `${JSON.stringify({ startedAt: stamp, quick, delays, rounds, decodeTokens, loadAtStart, targets, decode, prefill, results: results.map((r) => ({ ...r, decode: r.decode.map(({ tokenIds: _, ...rest }) => rest) })) }, null, 2)}\n`);
await writeFile(path.join(dir, `${file}.md`), markdown);
await writeFile(path.join(dir, 'speculation-latest.md'), markdown);
process.stdout.write(markdown);
log(`done: bench/results/${file}.{json,md}`);
