/**
 * Where a decode token's time goes, stage by stage (issue #24, "the hop"): a head with no
 * layers and N local peer processes (as bench/hop-cpu.ts), one session decoding, with
 * MESHNET_HOP_TRACE set so the head, its worker and the peers write stage marks
 * (src/core/runtime/hop-trace.ts) on the machine's shared monotonic clock. One stream keeps
 * one frame in flight, so all marks of one token follow each other in time: they are merged,
 * cut into tokens at `head.step`, and each gap between consecutive marks (a stage's `#n` is
 * its n-th occurrence in the token: hop 1, hop 2) is reported as its median over the tokens
 * whose marks came in the most common order.
 *
 *   node --import tsx bench/hop-stages.ts [--model DIR] [--peers 2] [--tokens 300] [--link relay] [--dtype fp32]
 *
 * Set MESHNET_HOME.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: path.resolve(import.meta.dirname, '../test/fixtures/models/stories260k') },
    peers: { type: 'string', default: '2' },
    tokens: { type: 'string', default: '300' },
    link: { type: 'string', default: 'relay' },
    dtype: { type: 'string', default: 'fp32' },
  },
});
const traceDir = mkdtempSync(path.join(os.tmpdir(), 'hop-stages-'));
process.env.MESHNET_HOP_TRACE = traceDir; // before anything starts: the head, its worker and the peers read it
const { RouteSession } = await import('../src/core/route/route-session.ts');
const { validateSamplingParams } = await import('../src/core/sampling/index.ts');
const { DEFAULT_HOP_TIMEOUT_MS, startHead } = await import('../src/node/head/head-node.ts');
const { openLocalModel, openLocalTokenizer } = await import('../src/node/local-model.ts');
const { spawnLocalPeers } = await import('../src/node/peer/local-peers.ts');

const peerCount = Number(values.peers);
const tokens = Number(values.tokens);
const link = values.link === 'direct' ? 'direct' : 'relay';
const dtype = values.dtype as 'fp32';
const nowUs = () => Number(process.hrtime.bigint() / 100n) / 10;

const model = await openLocalModel(values.model);
const { vocabSize } = model.checkpoint.config;
const head = await startHead({ model, tokenizer: await openLocalTokenizer(model), name: 'hop-stages', port: 0, host: '127.0.0.1', link, headLayers: 'none', dtype, device: 'cpu', threads: 1, log: () => {} });
const peers = spawnLocalPeers({ count: peerCount, headUrl: head.peerUrl, joinToken: head.joinToken, link, device: 'cpu', threads: 1, log: () => {} });

async function generate(count: number): Promise<number> {
  const params = validateSamplingParams({ temperature: 0, maxTokens: count });
  const promptIds = Array.from({ length: 8 }, (_, i) => 1 + ((i * 37) % (vocabSize - 1)));
  const session = new RouteSession({ head: head.headRunner, route: head.mesh, vocabSize, policy: { hopTimeoutMs: DEFAULT_HOP_TIMEOUT_MS, prefillChunk: 0 } }, { sessionId: randomUUID(), promptIds, params, speculate: 'off' });
  let n = 0;
  for await (const event of session) if (event.type === 'token') n++;
  return n;
}

let from = 0;
let to = 0;
let made = 0;
const loadBefore = os.loadavg()[0];
try {
  await head.waitForPeers(peerCount, 120_000);
  await generate(4); // the peers load their layers
  from = nowUs();
  made = await generate(tokens);
  to = nowUs();
} finally {
  await head.close();
  await peers.close();
}
await new Promise((r) => setTimeout(r, 500)); // the peers' last batch of marks

const marks: { t: number; stage: string; thread: string }[] = [];
for (const file of readdirSync(traceDir)) {
  for (const line of readFileSync(path.join(traceDir, file), 'utf8').split('\n')) {
    const space = line.indexOf(' ');
    if (space < 0) continue;
    const t = Number(line.slice(0, space));
    if (t >= from && t <= to) marks.push({ t, stage: line.slice(space + 1), thread: file.replace('.log', '') });
  }
}
rmSync(traceDir, { recursive: true, force: true });
marks.sort((a, b) => a.t - b.t);
// Cut into tokens at head.step; label repeated stages by occurrence.
const cycles: { labels: string[]; times: number[] }[] = [];
for (const m of marks) {
  if (m.stage === 'head.step') cycles.push({ labels: [], times: [] });
  const c = cycles.at(-1);
  if (!c) continue;
  const n = c.labels.filter((l) => l.split('#')[0] === m.stage).length;
  c.labels.push(`${m.stage}#${n + 1}`);
  c.times.push(m.t);
}
// The last cycle has no following head.step: close it at its own last mark; the first decode step is the prefill's.
const whole = cycles.slice(1, -1).map((c, i) => ({ ...c, next: cycles[i + 2]!.times[0]! }));
const orders = new Map<string, number>();
for (const c of whole) orders.set(c.labels.join(' '), (orders.get(c.labels.join(' ')) ?? 0) + 1);
const modal = [...orders].sort((a, b) => b[1] - a[1])[0]![0];
const kept = whole.filter((c) => c.labels.join(' ') === modal);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const labels = modal.split(' ');
const rows = labels.map((label, i) => {
  const gaps = kept.map((c) => (i + 1 < c.times.length ? c.times[i + 1]! : c.next) - c.times[i]!);
  return { from: label, to: labels[i + 1] ?? 'head.step#1 (next token)', medianUs: Math.round(median(gaps)) };
});
const totalUs = median(kept.map((c) => c.next - c.times[0]!));
console.log(`# hop stages: ${path.basename(values.model)}, ${peerCount} peers over ${link}, ${made} tokens, ${kept.length} of ${whole.length} tokens in the modal order; load ${loadBefore.toFixed(2)} → ${os.loadavg()[0].toFixed(2)}`);
console.log('| from | to | median µs |\n|---|---|---|');
for (const r of rows) console.log(`| ${r.from} | ${r.to} | ${r.medianUs} |`);
console.log(`| token | (step to step) | ${Math.round(totalUs)} |`);
