/**
 * One mesh of the speculation bench, measured in its own process:
 * `node --import tsx bench/speculation-mesh.ts '<MeshSpec JSON>'` prints one JSON line, a
 * MeshResult. A head (no layers of its own) and `peers` local peer processes, one
 * onnxruntime thread each; every frame's link gets the added round-trip time of the
 * measurement (MeteredLink). Rounds are interleaved: each round runs every delay × mode (and
 * every prefill chunk setting) once, so a burst of other work on the machine hits one round
 * of each, not all of one. The runner (bench/speculation.ts) takes medians over the rounds.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { RouteSession } from '../src/core/route/route-session.ts';
import { validateSamplingParams } from '../src/core/sampling/index.ts';
import type { SpeculateMode } from '../src/core/speculation/drafter.ts';
import { DEFAULT_HOP_TIMEOUT_MS, startHead } from '../src/node/head/head-node.ts';
import { openLocalModel, openLocalTokenizer } from '../src/node/local-model.ts';
import { spawnLocalPeers } from '../src/node/peer/local-peers.ts';
import { MeteredLink, newMeter } from './metered-link.ts';
import { promptOf } from './requests.ts';

export interface MeshSpec {
  readonly name: string;
  readonly model: string; // checkpoint folder
  readonly peers: number;
  readonly link: 'relay' | 'direct';
  readonly threads: number;
  readonly rounds: number;
  /** Decode: each prompt, `tokens` new tokens, greedy (or at `temperature`), each mode at each delay. */
  readonly decode?: { readonly prompts: readonly (readonly number[])[]; readonly tokens: number; readonly modes: readonly SpeculateMode[]; readonly delaysMs: readonly number[]; readonly temperature?: number };
  /** Prefill: one prompt of `promptLength` tokens, one new token, each chunk setting (0 = sequential) at `delayMs`. */
  readonly prefill?: { readonly promptLength: number; readonly chunks: readonly (number | 'auto')[]; readonly delayMs: number };
  /** Load the model itself as its draft model (the 'draft' mode drafts for itself). */
  readonly draftSelf?: boolean;
}

export interface DecodeSample {
  readonly round: number;
  readonly delayMs: number;
  readonly mode: SpeculateMode;
  readonly prompt: number;
  /** (tokens − 1) ÷ (last token time − first token time): decode throughput, bursts and all. */
  readonly tokensPerSecond: number;
  readonly ttftMs: number;
  readonly drafted: number;
  readonly accepted: number;
  readonly steps: number;
  readonly tokens: number;
  readonly tokenIds: readonly number[];
  readonly loadAverage: number;
}

export interface PrefillSample {
  readonly round: number;
  readonly delayMs: number;
  readonly chunk: number | 'auto';
  readonly ttftMs: number;
  /** Frames the first hop received for the prompt (1 when sequential). */
  readonly chunks: number;
  readonly loadAverage: number;
  /** CPU time (user + system) each peer process spent during the prefill, ms (/proc; empty elsewhere). */
  readonly peerCpuMs: readonly number[];
  /** Each hop's frame time as the head saw it (sent → answered, the link delay included), ms. */
  readonly hopMs: readonly number[];
}

export interface MeshResult {
  readonly spec: MeshSpec;
  readonly loadMs: number;
  readonly decode: DecodeSample[];
  readonly prefill: PrefillSample[];
}

/** CPU time (user + system) of process `pid` so far, ms; NaN where /proc is not there. */
function cpuMs(pid: number | undefined): number {
  try {
    // Fields after the command's closing parenthesis: state is 3rd, utime 14th, stime 15th.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return Number.NaN;
  }
}

async function measure(spec: MeshSpec): Promise<MeshResult> {
  const loadStart = performance.now();
  const model = await openLocalModel(spec.model);
  const { vocabSize } = model.checkpoint.config;
  const links: MeteredLink[] = [];
  const log = process.env.BENCH_VERBOSE ? (line: string) => process.stderr.write(`  ${line}\n`) : () => {};
  const head = await startHead({
    model,
    tokenizer: await openLocalTokenizer(model),
    name: spec.name,
    port: 0,
    host: '127.0.0.1',
    link: spec.link,
    headLayers: 'none',
    dtype: 'fp32',
    device: 'cpu',
    threads: spec.threads,
    speculation: spec.draftSelf ? { draftModel: spec.model } : {},
    log,
    wrapLink: (link) => {
      const metered = new MeteredLink(link, newMeter());
      links.push(metered);
      return metered;
    },
  });
  const peers = spawnLocalPeers({ count: spec.peers, headUrl: head.peerUrl, joinToken: head.joinToken, link: spec.link, device: 'cpu', threads: spec.threads, log });
  const setDelay = (ms: number) => links.forEach((l) => (l.delayMs = ms));
  const run = async (promptIds: readonly number[], tokens: number, speculate: SpeculateMode, prefillChunk: number | undefined, temperature = 0) => {
    const params = validateSamplingParams({ temperature, seed: 7, maxTokens: tokens });
    // Straight on the mesh (not the session table): EOS is ignored, as in bench/measure.ts.
    const session = new RouteSession(
      { head: head.headRunner, route: head.mesh, vocabSize, policy: { hopTimeoutMs: DEFAULT_HOP_TIMEOUT_MS, prefillChunk }, drafters: head.drafters },
      { sessionId: randomUUID(), promptIds, params, speculate },
    );
    const started = performance.now();
    const times: number[] = [];
    const ids: number[] = [];
    for await (const event of session) {
      if (event.type !== 'token') continue;
      times.push(performance.now() - started);
      ids.push(event.tokenId);
    }
    await session.closed;
    return { times, ids, telemetry: session.telemetry };
  };
  try {
    await head.waitForPeers(spec.peers, 180_000);
    await run(promptOf(8, vocabSize, 9), 4, 'off', 0); // loads the ranges; first-run costs out of the figures
    if (spec.draftSelf) await run(promptOf(8, vocabSize, 9), 4, 'draft', 0);
    const loadMs = performance.now() - loadStart;
    const decode: DecodeSample[] = [];
    const prefill: PrefillSample[] = [];
    for (let round = 0; round < spec.rounds; round++) {
      for (const delayMs of spec.decode?.delaysMs ?? []) {
        setDelay(delayMs);
        for (const [prompt, promptIds] of spec.decode!.prompts.entries()) {
          for (const mode of spec.decode!.modes) {
            const { times, ids, telemetry } = await run(promptIds, spec.decode!.tokens, mode, undefined, spec.decode!.temperature);
            const s = telemetry.speculation!;
            decode.push({
              round,
              delayMs,
              mode,
              prompt,
              tokensPerSecond: ((times.length - 1) * 1000) / (times[times.length - 1] - times[0]),
              ttftMs: times[0],
              drafted: s.drafted,
              accepted: s.accepted,
              steps: s.steps,
              tokens: times.length,
              tokenIds: ids,
              loadAverage: os.loadavg()[0],
            });
            process.stderr.write(`bench: ${spec.name} round ${round + 1}: +${delayMs} ms, prompt ${prompt}, ${mode}: ${decode.at(-1)!.tokensPerSecond.toFixed(1)} tok/s, ${s.drafted ? ((100 * s.accepted) / s.drafted).toFixed(0) : '—'}% kept, ${(times.length / s.steps).toFixed(2)} tok/round trip, load ${os.loadavg()[0].toFixed(1)}\n`);
          }
        }
      }
      if (spec.prefill) {
        setDelay(spec.prefill.delayMs);
        const promptIds = promptOf(spec.prefill.promptLength, vocabSize, 3 + round);
        for (const chunk of spec.prefill.chunks) {
          const before = links[0].meter.frames;
          const cpuBefore = peers.processes.map((p) => cpuMs(p.pid));
          const { times, telemetry } = await run(promptIds, 1, 'off', chunk === 'auto' ? undefined : chunk);
          const peerCpuMs = peers.processes.map((p, i) => cpuMs(p.pid) - cpuBefore[i]);
          prefill.push({ round, delayMs: spec.prefill.delayMs, chunk, ttftMs: times[0], chunks: links[0].meter.frames - before, loadAverage: os.loadavg()[0], peerCpuMs, hopMs: telemetry.hops.map((h) => h.totalMs) });
          process.stderr.write(`bench: ${spec.name} round ${round + 1}: prefill of ${spec.prefill.promptLength} at +${spec.prefill.delayMs} ms, chunk ${chunk}: TTFT ${times[0].toFixed(0)} ms, peer CPU ${peerCpuMs.map((ms) => ms.toFixed(0)).join(' + ')} ms, load ${os.loadavg()[0].toFixed(1)}\n`);
        }
      }
    }
    return { spec, loadMs, decode, prefill };
  } finally {
    await head.close();
    await peers.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await measure(JSON.parse(process.argv[2]) as MeshSpec);
  process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
}
