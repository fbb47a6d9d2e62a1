/**
 * One bench configuration, measured in its own process (so its peak resident memory is its
 * own): `node --import tsx bench/measure.ts '<MeasureSpec JSON>'` prints one JSON line,
 * a MeasureResult, on stdout. The runner (bench/run.ts) spawns one per configuration.
 * The requests and how their times become figures are bench/requests.ts; llama.cpp
 * configurations run in bench/llama-cpp/measure-llama.ts instead (no onnxruntime loaded).
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { generateLocal } from '../src/core/route/local-pipeline.ts';
import { validateSamplingParams } from '../src/core/sampling/index.ts';
import { RouteSession } from '../src/core/route/route-session.ts';
import { DEFAULT_HOP_TIMEOUT_MS, startHead } from '../src/node/head/head-node.ts';
import { loadLocalPipeline, openLocalModel, openLocalTokenizer, type LoadedPipeline } from '../src/node/local-model.ts';
import { spawnLocalPeers } from '../src/node/peer/local-peers.ts';
import type { GgufWeights } from './gguf/llama-gguf.ts';
import { MeteredLink, newMeter, type LinkMeter } from './metered-link.ts';
import { meshnetWeightOptions, type MeshnetWeights } from './meshnet-weights.ts';
import { parseWeightSpecName, resolveWeightSpec, type AccuracyLevel, type WeightSpec } from '../src/core/model/quant/weight-format.ts';
import { partWeightBytes } from '../src/core/model/shard-artifact.ts';
import { meshModel } from '../src/node/mesh-model.ts';
import type { LocalModel } from '../src/node/local-model.ts';
import { type Generate, measureRequests, median, ownPeakRss, promptOf, type RequestTiming, timed } from './requests.ts';

export type { RequestTiming } from './requests.ts';

export type MeasureSpec =
  | (CommonSpec & { readonly kind: 'one-process' })
  | (CommonSpec & { readonly kind: 'pipeline'; readonly peers: number; readonly link: 'relay' | 'direct'; readonly linkDelayMs: number })
  | (CommonSpec & { readonly kind: 'transformers'; readonly exportDir: string })
  | (CommonSpec & {
      readonly kind: 'llama-cpp';
      readonly gguf: string;
      readonly ggufWeights: GgufWeights;
      /** Folder node-llama-cpp is installed in (bench/llama-cpp/install.ts). */
      readonly moduleDir: string;
      readonly vocabSize: number;
      readonly contextSize: number;
      /** Weight bytes a decode step reads from this GGUF. */
      readonly weightBytesPerToken: number;
      /** `avx2`: an install that holds only ggml's CPU backends up to AVX2 (bench/llama-cpp/cpu-variant.ts); absent: the best one for this CPU. */
      readonly cpuVariant?: 'avx2';
    });

interface CommonSpec {
  readonly model: string; // checkpoint folder
  readonly threads: number;
  /** onnxruntime thread spinning (meshnet's default is off; transformers.js's is on). */
  readonly spinning: boolean;
  readonly repeats: number;
  readonly decodeTokens: number;
  readonly longPrompt: number;
  /** meshnet's weight format (one process and pipelines; absent = fp32, the only one before `--weights`). */
  readonly weights?: MeshnetWeights;
  /** MatMulNBits accuracy level for q8/q4 (absent: meshnet's default). */
  readonly accuracyLevel?: AccuracyLevel;
  /** A whole weight spec by its canonical name (`q4-b64-acc4`, run.ts `--q4-specs`); overrides `weights`' defaults and `accuracyLevel`. */
  readonly weightSpec?: string;
}

export interface MeasureResult {
  readonly spec: MeasureSpec;
  readonly loadMs: number;
  readonly short: RequestTiming;
  readonly long: RequestTiming;
  /** 1000 ÷ median inter-token interval, best repeat. */
  readonly decodeTokensPerSecond: number;
  /** (tokens − 1) ÷ (last − first token time), best repeat. */
  readonly meanDecodeTokensPerSecond: number;
  readonly fastestTokenMs: number;
  /** One process: median ms per decode token in each part (embedding, layers, LM head + sampling). */
  readonly breakdownMs?: Record<string, number>;
  /** Set by the runner when rounds are merged (bench/report.ts bestOf). */
  readonly rounds?: readonly { decodeTokensPerSecond: number; ttftShortMs: number; ttftLongMs: number; loadAverage: readonly [number, number] }[];
  /** 1-minute load average before and after (other processes on the machine). */
  readonly loadAverage: readonly [number, number];
  /** CPU time of this process during the measured requests ÷ their wall time. */
  readonly cpuPerWall: number;
  /** Peak resident memory in bytes: this process, then each peer process. */
  readonly peakRssBytes: number;
  readonly peers: { readonly id: string; readonly range?: [number, number]; readonly peakRssBytes: number }[];
  /** Per hop (pipeline only): frames, bytes and request times the head saw. */
  readonly hops: (LinkMeter & {
    readonly peerId: string;
    readonly range?: [number, number];
    readonly hopMeanMs: number;
    /** The peer's own account per decode frame (its stats): the whole frame, and inside the shard run. */
    readonly peerBusyMs?: number;
    readonly peerRunMs?: number;
    /** Median round trip of a control ping on this link: socket and both event loops, no frame work. */
    readonly pingMs?: number;
  })[];
  readonly devices?: readonly string[];
  /** Weight bytes one decode step reads, when the configuration's weights are not the checkpoint's fp32 (llama.cpp's GGUF types). */
  readonly weightBytesPerToken?: number;
  /** meshnet: the weight format served (canonical spec) and its packed bytes per decoder layer, for the head's parts, and for the LM head alone. */
  readonly packed?: { readonly weights: WeightSpec; readonly bytesPerLayer: number; readonly headBytes: number; readonly lmHeadBytes: number };
}

/** The weight spec `spec` asks for (as meshnetWeightOptions, plus its accuracy level) and its packed bytes: what the artifacts hold. */
function packedOf(model: LocalModel, spec: CommonSpec): NonNullable<MeasureResult['packed']> {
  const level = spec.accuracyLevel !== undefined ? { accuracyLevel: spec.accuracyLevel } : {};
  const named = spec.weightSpec === undefined ? undefined : parseWeightSpecName(spec.weightSpec);
  if (spec.weightSpec !== undefined && !named) throw new Error(`weightSpec: '${spec.weightSpec}' is not a weight spec name`);
  const weights = named ?? resolveWeightSpec(model.checkpoint.config, 'fp32', { format: spec.weights ?? 'fp32', ...level });
  const mesh = meshModel(model, 'bench', 'fp32', weights);
  const lmHeadBytes = partWeightBytes(model.checkpoint.config, model.checkpoint.tensors, { kind: 'head' }, 'fp32', weights);
  return { weights, bytesPerLayer: mesh.bytesPerLayer, headBytes: mesh.headBytes, lmHeadBytes };
}

/** The engine options for `spec`'s weights: the format's defaults by name, or the exact spec (a level or a whole spec asked for). */
const weightOptionsOf = (spec: CommonSpec, packed: NonNullable<MeasureResult['packed']>) =>
  spec.accuracyLevel === undefined && spec.weightSpec === undefined ? meshnetWeightOptions(spec.weights) : { weights: packed.weights };

/** The bytes a decode step reads in a compact format (its layers and LM head, packed); undefined for fp32 (the checkpoint's). */
const packedPerToken = (packed: NonNullable<MeasureResult['packed']>, numLayers: number) =>
  packed.weights.format === 'fp32' ? undefined : numLayers * packed.bytesPerLayer + packed.lmHeadBytes;

/** Time each part of the one-process pipeline per decode token (one position per call). */
function instrument(pipeline: LoadedPipeline): Record<string, number[]> {
  const parts: Record<string, number[]> = { embedding: [], layers: [], 'LM head': [] };
  const wrap = <A extends unknown[], R>(target: Record<string, unknown>, key: string, part: string, single: (...args: A) => boolean) => {
    const original = (target[key] as (...args: A) => Promise<R>).bind(target);
    target[key] = async (...args: A) => {
      const started = performance.now();
      const result = await original(...args);
      if (single(...args)) parts[part].push(performance.now() - started);
      return result;
    };
  };
  const head = pipeline.head as unknown as Record<string, unknown>;
  wrap(head, 'embed', 'embedding', (ids: readonly number[]) => ids.length === 1);
  wrap(head, 'logits', 'LM head', (hidden: { tokens: number }) => hidden.tokens === 1);
  for (const stage of pipeline.stages) wrap(stage.executor as unknown as Record<string, unknown>, 'run', 'layers', (step: { hidden: { tokens: number } }) => step.hidden.tokens === 1);
  return parts;
}

/** Peak resident memory of another process (Linux: VmHWM), bytes. */
async function peakRssOf(pid: number | undefined): Promise<number> {
  if (pid === undefined) return 0;
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /VmHWM:\s+(\d+) kB/.exec(status)?.[1];
  return kb ? Number(kb) * 1024 : 0;
}

const params = (tokens: number) => validateSamplingParams({ temperature: 0, maxTokens: tokens });

async function oneProcess(spec: MeasureSpec & { kind: 'one-process' }): Promise<MeasureResult> {
  const loadStart = performance.now();
  const model = await openLocalModel(spec.model);
  const { numLayers, vocabSize } = model.checkpoint.config;
  const packed = packedOf(model, spec);
  const weightOptions = weightOptionsOf(spec, packed);
  const pipeline = await loadLocalPipeline(model, { ranges: [{ start: 0, end: numLayers }], device: 'cpu', dtype: 'fp32', threads: spec.threads, spinning: spec.spinning, ...weightOptions });
  const loadMs = performance.now() - loadStart;
  const parts = instrument(pipeline);
  try {
    const generate: Generate = (promptIds, tokens) =>
      timed(promptIds, async (onToken) => {
        // No speculation in these rows: every engine here decodes one token per step.
        for await (const token of generateLocal(pipeline, promptIds, params(tokens), randomUUID(), undefined, 'off')) onToken(token.tokenId);
      });
    const runs = await measureRequests(generate, vocabSize, spec);
    const breakdownMs = Object.fromEntries(Object.entries(parts).map(([part, times]) => [part, median(times)]));
    const perToken = packedPerToken(packed, numLayers);
    return { spec, loadMs, ...runs, breakdownMs, peakRssBytes: ownPeakRss(), peers: [], hops: [], devices: pipeline.devices, packed, ...(perToken !== undefined && { weightBytesPerToken: perToken }) };
  } finally {
    await pipeline.dispose();
  }
}

async function pipelineOfPeers(spec: MeasureSpec & { kind: 'pipeline' }): Promise<MeasureResult> {
  const loadStart = performance.now();
  const model = await openLocalModel(spec.model);
  const { vocabSize, hiddenSize, numLayers } = model.checkpoint.config;
  const packed = packedOf(model, spec);
  const meters = new Map<string, LinkMeter>();
  const links = new Map<string, MeteredLink>();
  const log = process.env.BENCH_VERBOSE ? (line: string) => process.stderr.write(`  ${line}\n`) : () => {};
  const head = await startHead({
    model,
    tokenizer: await openLocalTokenizer(model),
    name: 'bench',
    port: 0,
    host: '127.0.0.1',
    link: spec.link,
    headLayers: 'none',
    dtype: 'fp32',
    device: 'cpu',
    threads: spec.threads,
    ...weightOptionsOf(spec, packed),
    // A peer building and loading a 1B-shaped model's q4 layers on a loaded machine takes longer
    // than the defaults (30 s for ready, 60 s for a control answer such as assign's).
    readyTimeoutMs: 300_000,
    linkTimeoutMs: 300_000,
    log,
    wrapLink: (link, peerId) => {
      const meter = newMeter();
      meters.set(peerId, meter);
      const metered = new MeteredLink(link, meter, spec.linkDelayMs, 2 * hiddenSize * 4 - 1);
      links.set(peerId, metered);
      return metered;
    },
  });
  const peers = spawnLocalPeers({ count: spec.peers, headUrl: head.peerUrl, joinToken: head.joinToken, link: spec.link, device: 'cpu', threads: spec.threads, log });
  try {
    await head.waitForPeers(spec.peers, 120_000);
    let lastHops: { peerId: string; range: { start: number; end: number }; frames: number; totalMs: number }[] = [];
    const generate: Generate = (promptIds, tokens) =>
      timed(promptIds, async (onToken) => {
        // Straight on the mesh (not the session table): EOS is ignored, as in every other configuration.
        // One token per step and a sequential prefill, as every other engine here (bench/speculation.ts measures both).
        const session = new RouteSession({ head: head.headRunner, route: head.mesh, vocabSize, policy: { hopTimeoutMs: DEFAULT_HOP_TIMEOUT_MS, prefillChunk: 0 } }, { sessionId: randomUUID(), promptIds, params: params(tokens), speculate: 'off' });
        for await (const event of session) if (event.type === 'token') onToken(event.tokenId);
        lastHops = session.telemetry.hops;
      });
    // The first request also makes the peers load their layers: count it as loading.
    await generate(promptOf(4, vocabSize, 9), 1);
    const loadMs = performance.now() - loadStart;
    for (const meter of meters.values()) Object.assign(meter, newMeter());
    const statsBefore = await peerStats(links);
    const runs = await measureRequests(generate, vocabSize, spec);
    const statsAfter = await peerStats(links);
    const pings = await pingTimes(links);
    const ranges = new Map(lastHops.map((h) => [h.peerId, [h.range.start, h.range.end] as [number, number]]));
    const peerResults = await Promise.all(
      peers.processes.map(async (child, i) => ({ id: `local-${i + 1}`, range: ranges.get(`local-${i + 1}`), peakRssBytes: await peakRssOf(child.pid) })),
    );
    const hops = [...meters].map(([peerId, meter]) => ({
      peerId,
      range: ranges.get(peerId),
      ...meter,
      hopMeanMs: meter.frames ? meter.totalMs / meter.frames : 0,
      ...perDecodeFrame(statsBefore.get(peerId), statsAfter.get(peerId)),
      pingMs: pings.get(peerId),
    }));
    const perToken = packedPerToken(packed, numLayers);
    return { spec, loadMs, ...runs, peakRssBytes: ownPeakRss(), peers: peerResults, hops, packed, ...(perToken !== undefined && { weightBytesPerToken: perToken }) };
  } finally {
    await head.close();
    await peers.close();
  }
}

type PeerStats = { decodeFrames?: number; decodeBusyMs?: number; decodeRunMs?: number };

async function peerStats(links: ReadonlyMap<string, MeteredLink>): Promise<Map<string, PeerStats>> {
  const out = new Map<string, PeerStats>();
  for (const [peerId, link] of links) {
    const answer = await link.control({ kind: 'stats', kvEntries: 0, kvBytes: 0, kvBudgetBytes: 0, tokensServed: 0, framesServed: 0 }).catch(() => undefined);
    if (answer?.kind === 'stats') out.set(peerId, answer);
  }
  return out;
}

/** Median ping round trip per link (100 pings, one at a time). */
async function pingTimes(links: ReadonlyMap<string, MeteredLink>): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const [peerId, link] of links) {
    const times: number[] = [];
    for (let i = 0; i < 100; i++) {
      const started = performance.now();
      const answer = await link.control({ kind: 'ping', t: Date.now() }).catch(() => undefined);
      if (answer?.kind === 'pong') times.push(performance.now() - started);
    }
    if (times.length) out.set(peerId, median(times));
  }
  return out;
}

function perDecodeFrame(before: PeerStats | undefined, after: PeerStats | undefined): { peerBusyMs?: number; peerRunMs?: number } {
  const frames = (after?.decodeFrames ?? 0) - (before?.decodeFrames ?? 0);
  if (!before || !after || frames <= 0 || after.decodeBusyMs === undefined) return {};
  return { peerBusyMs: (after.decodeBusyMs - before.decodeBusyMs!) / frames, peerRunMs: (after.decodeRunMs! - before.decodeRunMs!) / frames };
}

async function transformersJs(spec: MeasureSpec & { kind: 'transformers' }): Promise<MeasureResult> {
  const loadStart = performance.now();
  const { AutoModelForCausalLM, Tensor, env } = await import('@huggingface/transformers');
  env.allowRemoteModels = false;
  env.localModelPath = path.dirname(spec.exportDir);
  const model = await AutoModelForCausalLM.from_pretrained(path.basename(spec.exportDir), {
    local_files_only: true,
    device: 'cpu',
    dtype: 'fp32',
    session_options: {
      intraOpNumThreads: spec.threads,
      ...(spec.spinning ? {} : { extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } } }),
    },
  });
  const loadMs = performance.now() - loadStart;
  const vocab = JSON.parse(await readFile(path.join(spec.exportDir, 'config.json'), 'utf8')).vocab_size as number;
  try {
    const generate: Generate = (promptIds, tokens) =>
      timed(promptIds, async (onToken) => {
        const ids = BigInt64Array.from(promptIds.map(BigInt));
        let prompt = true;
        // put() gets the prompt first, then each new token.
        const streamer = {
          put(value: bigint[][] | { tolist(): bigint[][] }) {
            if (prompt) return void (prompt = false);
            const rows = Array.isArray(value) ? value : value.tolist();
            for (const id of rows[0] ?? []) onToken(Number(id));
          },
          end() {},
        };
        await model.generate({
          inputs: new Tensor('int64', ids, [1, ids.length]),
          attention_mask: new Tensor('int64', new BigInt64Array(ids.length).fill(1n), [1, ids.length]),
          max_new_tokens: tokens,
          min_new_tokens: tokens, // never stop at EOS, like the meshnet runs
          do_sample: false,
          streamer: streamer as never,
        });
      });
    const runs = await measureRequests(generate, vocab, spec);
    return { spec, loadMs, ...runs, peakRssBytes: ownPeakRss(), peers: [], hops: [] };
  } finally {
    await model.dispose();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const spec = JSON.parse(process.argv[2]) as MeasureSpec;
  if (spec.kind === 'llama-cpp') throw new Error('llama.cpp configurations run in bench/llama-cpp/measure-llama.ts');
  const result = spec.kind === 'one-process' ? await oneProcess(spec) : spec.kind === 'pipeline' ? await pipelineOfPeers(spec) : await transformersJs(spec);
  // Exit once the line is flushed: a large result written to a pipe would be cut by an immediate exit.
  process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
}
