/**
 * `npm run bench:event-loop`: the head's event loop while 16 streams run and a new JSON schema
 * compiles (issue #27, "Grammar work off the event loop": p99 ≤ 20 ms). A head process
 * (bench/event-loop-head.ts, under `--cpu-prof`) over a random Qwen2-shaped checkpoint with the
 * real Qwen2.5 tokenizer (151,936-token vocabulary; test/fixtures/qwen-chat-model.ts) and 2
 * local peer processes; this process runs 16 streaming clients (the official `openai` client):
 * 8 sampled free-text completions (temperature 0.8), 4 greedy, 4 chat completions constrained
 * by a JSON schema compiled before the windows; each restarts when it ends. Two windows, in
 * the head: "steady" (SECONDS of the 16 streams) and "compile" (from sending a request with a
 * new schema to its answer). For each: event-loop delay p50 / p99 / max, main-thread busy ms
 * per streamed token, the main thread's CPU ms per token (/proc; the load-independent figure),
 * process CPU ms per token (every thread), tokens/s, the load
 * average; and from the profile, the main thread's busy time by project frame and the long
 * tasks (≥ 20 ms) named by the frames that held them.
 *
 * Each round runs a head per variant (`--variants worker,sampler,main`: `worker` = the LM head and
 * embedding in the head worker and sampling in the sampler worker (the default); `sampler` =
 * sampling in the worker, the LM head on the main thread; `main` = both on the main thread;
 * formerly `worker,main` meant sampling in the sampler worker,
 * the default, or on the main thread as before), alternating their order round by round.
 *
 *   npm run bench:event-loop [-- --seconds S] [--rounds N] [--variants worker,sampler,main] [--head-layers auto|none|A:B] [--no-profile]
 *
 * Writes bench/results/event-loop-<time>.json and .md (and event-loop-latest.md).
 */
import { fork } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import { writeQwenChatModel } from '../test/fixtures/qwen-chat-model.ts';
import { summarizeProfile, type ProfileSummary } from './cpu-profile-summary.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '1' },
    'head-layers': { type: 'string', default: 'auto' },
    'no-profile': { type: 'boolean', default: false },
    variants: { type: 'string', default: 'worker,sampler' },
  },
});
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const headLayers = values['head-layers']!;
const profile = !values['no-profile'];
type Variant = 'worker' | 'sampler' | 'main';
const variants = values.variants!.split(',') as Variant[];
if (variants.some((v) => v !== 'worker' && v !== 'sampler' && v !== 'main')) throw new Error('--variants: worker, sampler and/or main');

const warmSchema = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer', minimum: 0, maximum: 120 }, tags: { type: 'array', items: { type: 'string', maxLength: 8 }, maxItems: 3 } },
  required: ['name', 'age', 'tags'],
  additionalProperties: false,
} as const;
/** A new schema each round (its grammar is not in the cache): the film schema of grammar-off-loop.test.ts, with a round-specific field. */
const newSchema = (round: number) => ({
  type: 'object',
  properties: {
    title: { type: 'string', minLength: 2, maxLength: 40 },
    year: { type: 'integer', minimum: 1900, maximum: 2100 },
    genres: { type: 'array', items: { enum: ['drama', 'comedy', 'horror', 'documentary', 'animation'] }, minItems: 1, maxItems: 3 },
    cast: { type: 'array', items: { type: 'object', properties: { name: { type: 'string', maxLength: 24 }, role: { type: 'string', maxLength: 16 } }, required: ['name', 'role'], additionalProperties: false }, maxItems: 4 },
    rating: { type: 'number', minimum: 0, maximum: 10 },
    [`extra${round}`]: { type: 'string', maxLength: 10 + round },
  },
  required: ['title', 'year', 'genres', 'cast', 'rating'],
  additionalProperties: false,
});

interface WindowResult {
  readonly name: string;
  readonly startUs: number;
  readonly endUs: number;
  readonly delay: { p50: number; p99: number; max: number; count: number };
  readonly mainActiveMs: number;
  readonly mainUtilization: number;
  readonly cpuMs: number;
  readonly mainCpuMs: number;
}

const home = await mkdtemp(path.join(os.tmpdir(), 'meshnet-bench-event-loop-'));
const model = await writeQwenChatModel();

interface Row {
  readonly variant: Variant;
  readonly round: number;
  readonly window: string;
  readonly tokens: number;
  readonly ms: number;
  readonly load: number;
  readonly result: WindowResult;
  readonly compileMs?: number;
  summary?: ProfileSummary;
}

/** One head process with sampling on `variant`: the steady window, then the compile window. */
async function runHead(variant: Variant, round: number): Promise<Row[]> {
  const profileDir = path.join(home, `profile-${variant}-${round}`);
  const child = fork(path.resolve(import.meta.dirname, 'event-loop-head.ts'), [model.dir, headLayers, variant], {
    execArgv: ['--import', 'tsx', ...(profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [])],
    env: { ...process.env, MESHNET_HOME: path.join(home, 'home') },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const replies: ((m: Record<string, unknown>) => void)[] = [];
  child.on('message', (m: Record<string, unknown>) => replies.shift()?.(m));
  const reply = () => new Promise<Record<string, unknown>>((resolve) => replies.push(resolve));
  const ready = await reply();
  const client = new OpenAI({ baseURL: `${ready.url as string}v1`, apiKey: 'unused', maxRetries: 0, timeout: 300_000 });
  const modelId = ready.modelId as string;

  let tokens = 0;
  let running = true;
  const abort = new AbortController();
  async function streamForever(kind: Kind, i: number): Promise<void> {
    let n = 0;
    while (running) {
      try {
        if (kind === 'schema') {
          const stream = await client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: `Person ${i}.${n++}` }], max_tokens: 400, temperature: 0.8, seed: i * 1000 + n, stream: true, response_format: { type: 'json_schema', json_schema: { name: 'person', schema: warmSchema } } }, { signal: abort.signal });
          for await (const chunk of stream) if (chunk.choices[0]?.delta?.content) tokens++;
        } else {
          const stream = await client.completions.create({ model: modelId, prompt: `story ${i}.${n++}`, max_tokens: 2000, temperature: kind === 'greedy' ? 0 : 0.8, seed: i * 1000 + n, stream: true }, { signal: abort.signal });
          for await (const chunk of stream) if (chunk.choices[0]?.text) tokens++;
        }
      } catch (error) {
        if (!abort.signal.aborted) throw error;
      }
    }
  }
  async function window<T>(name: string, during: () => Promise<T>): Promise<{ result: WindowResult; tokens: number; ms: number; load: number; value: T }> {
    child.send({ cmd: 'start', name });
    await reply();
    const t0 = performance.now();
    const before = tokens;
    const value = await during();
    const got = tokens - before;
    const ms = performance.now() - t0;
    child.send({ cmd: 'stop', name });
    const result = (await reply()) as unknown as WindowResult;
    return { result, tokens: got, ms, load: os.loadavg()[0], value };
  }

  // The warm schema's grammar compiles before any window: the constrained streams reuse it.
  await client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: 'warm' }], max_tokens: 4, response_format: { type: 'json_schema', json_schema: { name: 'person', schema: warmSchema } } });
  const streams = kinds.map((kind, i) => streamForever(kind, i));
  const failed = Promise.race(streams).then(() => undefined);
  while (tokens < 200) await Promise.race([new Promise((r) => setTimeout(r, 50)), failed]);

  const rows: Row[] = [];
  const steady = await window('steady', () => new Promise((r) => setTimeout(r, seconds * 1000)));
  rows.push({ variant, round, window: 'steady', tokens: steady.tokens, ms: steady.ms, load: steady.load, result: steady.result });
  const compile = await window('compile', async () => {
    const sent = performance.now();
    await client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: 'A film.' }], max_tokens: 12, seed: 3, response_format: { type: 'json_schema', json_schema: { name: 'film', schema: newSchema(round) } } });
    return performance.now() - sent;
  });
  rows.push({ variant, round, window: 'compile', tokens: compile.tokens, ms: compile.ms, load: compile.load, result: compile.result, compileMs: compile.value });
  running = false;
  abort.abort();
  await Promise.allSettled(streams);
  child.send({ cmd: 'exit' });
  await new Promise((resolve) => child.once('exit', resolve));
  if (profile) {
    // --cpu-prof writes one profile per thread (CPU.<date>.<time>.<pid>.<thread>.<seq>): the head
    // worker's, the sampler worker's and the grammar worker's beside the main thread's (thread 0).
    const file = (await readdir(profileDir)).find((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f));
    for (const row of rows) if (file) row.summary = await summarizeProfile(path.join(profileDir, file), row.result.startUs, row.result.endUs);
  }
  return rows;
}

type Kind = 'sampled' | 'greedy' | 'schema';
const kinds: Kind[] = [...Array<Kind>(8).fill('sampled'), ...Array<Kind>(4).fill('greedy'), ...Array<Kind>(4).fill('schema')];
const rows: Row[] = [];
for (let round = 1; round <= rounds; round++) {
  // Alternating, so both variants see the same stretch of the machine's load.
  for (const variant of round % 2 === 1 ? variants : [...variants].reverse()) rows.push(...(await runHead(variant, round)));
}

const f1 = (x: number) => x.toFixed(1);
const lines: string[] = [
  `# Head event loop, 16 streams + a new schema (${new Date().toISOString()})`,
  '',
  `Qwen2-shaped random checkpoint, 151,936-token vocabulary, hidden 32, 2 layers; head-layers ${headLayers}, 2 local peer processes, CPU fp32, 1 thread; 8 sampled + 4 greedy + 4 schema-constrained streams. Node ${process.version}, ${os.cpus().length} cores.`,
  '',
  '| variant | round | window | ms | tokens | tokens/s | loop delay p50 / p99 / max ms | main-thread busy | main busy ms/token | main CPU ms/token | process CPU ms/token | load |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
];
for (const row of rows) {
  const r = row.result;
  lines.push(`| ${row.variant} | ${row.round} | ${row.window}${row.compileMs ? ` (answer ${row.compileMs.toFixed(0)} ms)` : ''} | ${row.ms.toFixed(0)} | ${row.tokens} | ${f1((row.tokens / row.ms) * 1000)} | ${f1(r.delay.p50)} / ${f1(r.delay.p99)} / ${f1(r.delay.max)} | ${(r.mainUtilization * 100).toFixed(0)} % | ${(r.mainActiveMs / row.tokens).toFixed(2)} | ${(r.mainCpuMs / row.tokens).toFixed(2)} | ${(r.cpuMs / row.tokens).toFixed(2)} | ${f1(row.load)} |`);
}
rows.forEach((row) => {
  const s = row.summary;
  if (!s) return;
  lines.push('', `## Variant ${row.variant}, round ${row.round}, ${row.window}: main thread busy ${s.busyMs.toFixed(0)} ms in the profile`, '', 'By innermost project frame:', '');
  for (const { frame, ms } of s.byProjectFrame.slice(0, 10)) lines.push(`- ${ms.toFixed(0)} ms ${frame}`);
  lines.push('', 'Self time:', '');
  for (const { frame, ms } of s.self.slice(0, 10)) lines.push(`- ${ms.toFixed(0)} ms ${frame}`);
  lines.push('', `Long tasks (≥ 20 ms): ${s.longTasks.length}${s.longTasks.length ? `, longest ${s.longTasks[0].ms.toFixed(0)} ms` : ''}`, '');
  for (const task of s.longTasks.slice(0, 6)) lines.push(`- ${task.ms.toFixed(0)} ms at +${task.startMs.toFixed(0)} ms: ${task.by.map((b) => `${b.frame} ${b.ms.toFixed(0)} ms`).join('; ')}`);
});
const report = lines.join('\n') + '\n';
console.log(report);
const dir = path.resolve(import.meta.dirname, 'results');
await mkdir(dir, { recursive: true });
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
await writeFile(path.join(dir, `event-loop-${stamp}.json`), JSON.stringify({ headLayers, seconds, rows }, null, 2));
await writeFile(path.join(dir, `event-loop-${stamp}.md`), report);
await writeFile(path.join(dir, 'event-loop-latest.md'), report);
await model.remove();
await rm(home, { recursive: true, force: true });
