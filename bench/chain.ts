/**
 * `npm run bench:chain [-- --link-delay-ms 10] [--model DIR | --positions N] [--tokens 64] [--prompt 480] [--rounds 3]`:
 * chained route vs star route (issue 25). A head (no layers of its own) and three peers
 * (runPeer, each listening for direct links) in this process, every link delayed by
 * `--link-delay-ms` each way: head → peer frames and answers (MeteredLink, that delay each
 * way), chained frames the head posts and copies it hears (the chain port), and every frame a
 * peer forwards to the next (runPeer's linkDelayMs). Star pays 2·3 = 6 delays per token, a
 * chain 3 + 1 = 4: 1.5× is the limit when compute is free. Prints one line per measurement
 * and a JSON summary (medians over the rounds): decode tokens/s with speculation off and on,
 * and time to first token of a `--prompt`-token prompt (pipelined prefill). stories260k holds
 * 512 positions; `--positions N` runs a random checkpoint of its shape with N positions instead
 * (bench/generate-checkpoint.ts), for the 1,536-token prompt: `--positions 2048 --prompt 1536`.
 */
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { parseArgs } from 'node:util';
import type { ChainPort } from '../src/core/runtime/chain-port.ts';
import { RouteSession } from '../src/core/route/route-session.ts';
import type { RouteMode } from '../src/core/route/chain-route.ts';
import { validateSamplingParams } from '../src/core/sampling/index.ts';
import type { SpeculateMode } from '../src/core/speculation/drafter.ts';
import { startHead } from '../src/node/head/head-node.ts';
import { openLocalModel, openLocalTokenizer } from '../src/node/local-model.ts';
import { runPeer, type RunningPeer } from '../src/node/peer/run-peer.ts';
import path from 'node:path';
import { generateCheckpoint } from './generate-checkpoint.ts';
import { MeteredLink, newMeter } from './metered-link.ts';

const { values } = parseArgs({
  options: {
    'link-delay-ms': { type: 'string' },
    model: { type: 'string' },
    tokens: { type: 'string' },
    prompt: { type: 'string' },
    rounds: { type: 'string' },
    positions: { type: 'string' },
  },
});
const delayMs = Number(values['link-delay-ms'] ?? 10);
const positions = values.positions === undefined ? undefined : Number(values.positions);
if (positions !== undefined && !(Number.isInteger(positions) && positions > 0)) throw new Error(`--positions must be a positive integer, got ${values.positions}`);
if (positions !== undefined && values.model !== undefined) throw new Error('give --model or --positions, not both');
/** stories260k's shape (random weights), with `positions` positions. */
const storiesShaped = (n: number) =>
  generateCheckpoint(path.join(import.meta.dirname, '.cache', `stories260k-shaped-${n}`), { hiddenSize: 64, numLayers: 5, numHeads: 8, numKvHeads: 4, intermediateSize: 172, vocabSize: 512, maxPositionEmbeddings: n, tied: true, seed: 260 });
const modelDir = positions !== undefined ? await storiesShaped(positions) : (values.model ?? new URL('../test/fixtures/models/stories260k', import.meta.url).pathname);
const tokens = Number(values.tokens ?? 64);
const promptTokens = Number(values.prompt ?? 480);
const rounds = Number(values.rounds ?? 3);
const TOKEN = 'bench-chain-token';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The chain port with the link's delay each way: posts go out late, copies arrive late. */
function delayedChain(port: ChainPort): ChainPort {
  return {
    post: (frame) => void sleep(delayMs).then(() => port.post(frame)),
    listen: (listener) => port.listen({ copy: (f) => void sleep(delayMs).then(() => listener.copy(f)), report: (e) => void sleep(delayMs).then(() => listener.report(e)) }),
  };
}

const model = await openLocalModel(modelDir);
const tokenizer = await openLocalTokenizer(model);
const head = await startHead({
  model,
  tokenizer,
  name: 'bench',
  port: 0,
  host: '127.0.0.1',
  joinToken: TOKEN,
  link: 'relay',
  headLayers: 'none',
  dtype: 'fp32',
  device: 'cpu',
  threads: 1,
  memoryBudgetBytes: 1 << 30,
  batching: false,
  wrapLink: (link) => new MeteredLink(link, newMeter(), 2 * delayMs),
  wrapChain: (port) => delayedChain(port),
});
const peers: RunningPeer[] = [];
for (let i = 1; i <= 3; i++) {
  peers.push(await runPeer({ headUrl: head.peerUrl, listenPort: 0, device: 'cpu', memoryBudgetBytes: 1 << 30, joinToken: TOKEN, peerId: `bench-${i}`, threads: 1, linkDelayMs: delayMs }));
}
await head.waitForPeers(3, 30_000);

const vocab = model.checkpoint.config.vocabSize;
const prompt = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 3 + ((i * 37 + seed * 11) % (vocab - 3)));

async function run(mode: RouteMode, speculate: SpeculateMode, promptIds: number[], maxTokens: number) {
  const session = new RouteSession(
    { head: head.headRunner, route: head.mesh, vocabSize: vocab, tokenizer, policy: { hopTimeoutMs: 30_000, routeMode: mode } },
    { sessionId: randomUUID(), promptIds, params: validateSamplingParams({ temperature: 0, maxTokens }), speculate },
  );
  const started = performance.now();
  let first: number | undefined;
  const ids: number[] = [];
  for await (const event of session) {
    if (event.type !== 'token') continue;
    first ??= performance.now();
    ids.push(event.tokenId);
  }
  const end = performance.now();
  await session.closed;
  return { ids, ttftMs: first! - started, decodeTps: (ids.length - 1) / ((end - first!) / 1000), repairs: session.telemetry.repairs.length };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results: Record<string, { tps: number[]; ttft: number[] }> = {};
const answers = new Map<string, string>();
for (let round = 0; round < rounds; round++) {
  for (const mode of ['star', 'chain'] as const) {
    for (const speculate of ['off', 'ngram'] as const) {
      const r = await run(mode, speculate, prompt(8, round), tokens);
      const key = `${mode} spec ${speculate}`;
      (results[key] ??= { tps: [], ttft: [] }).tps.push(r.decodeTps);
      const answer = r.ids.join(',');
      if (answers.has(`${round}/${speculate}`) && answers.get(`${round}/${speculate}`) !== answer) throw new Error(`${key}: tokens differ from star's`);
      answers.set(`${round}/${speculate}`, answer);
      console.log(`round ${round} ${key}: ${r.decodeTps.toFixed(1)} tok/s (${r.ids.length} tokens, ${r.repairs} repairs)`);
    }
    const t = await run(mode, 'off', prompt(promptTokens, round), 2);
    (results[`${mode} ttft`] ??= { tps: [], ttft: [] }).ttft.push(t.ttftMs);
    console.log(`round ${round} ${mode}: TTFT of ${promptTokens} tokens ${t.ttftMs.toFixed(0)} ms`);
  }
}
const m = (key: string) => median(results[key].tps);
const summary = {
  model: model.key,
  delayMsEachWay: delayMs,
  rounds,
  load: os.loadavg().map((x) => x.toFixed(2)).join(' '),
  tokensPerSecond: { starOff: m('star spec off'), chainOff: m('chain spec off'), starOn: m('star spec ngram'), chainOn: m('chain spec ngram') },
  speedupOff: m('chain spec off') / m('star spec off'),
  speedupOn: m('chain spec ngram') / m('star spec ngram'),
  ttftMs: { promptTokens, star: median(results['star ttft'].ttft), chain: median(results['chain ttft'].ttft) },
};
console.log(JSON.stringify({ ...summary, ttftRatio: summary.ttftMs.chain / summary.ttftMs.star }));
for (const peer of peers) await peer.close();
await head.close();
process.exit(0);
