/**
 * The bench report: raw per-configuration results plus the derived figures and the verdict
 * on each target. Pure: plain data in, plain data out.
 */
import type { GrammarMaskReport } from './grammar-mask.ts';
import type { ModelConfig } from '../src/core/model/types.ts';
import type { GgufWeights } from './gguf/llama-gguf.ts';
import type { MeasureResult, MeasureSpec } from './measure.ts';
import { LLAMA_CPP_COUNTERPART, type MeshnetWeights } from './meshnet-weights.ts';

/**
 * One configuration's rounds merged: the round with the best decode rate gives the decode
 * figures and hop meters; TTFT is the fastest round's; peak RSS the highest seen.
 */
export function bestOf(rounds: readonly MeasureResult[]): MeasureResult {
  const best = rounds.reduce((a, b) => (b.decodeTokensPerSecond > a.decodeTokensPerSecond ? b : a));
  const fastest = (pick: (r: MeasureResult) => MeasureResult['short']) => rounds.map(pick).reduce((a, b) => (b.ttftMs < a.ttftMs ? b : a));
  const rss = (r: MeasureResult) => r.peakRssBytes;
  return {
    ...best,
    short: { ...best.short, ttftMs: fastest((r) => r.short).ttftMs },
    long: fastest((r) => r.long),
    fastestTokenMs: Math.min(...rounds.map((r) => r.fastestTokenMs)),
    meanDecodeTokensPerSecond: Math.max(...rounds.map((r) => r.meanDecodeTokensPerSecond)),
    peakRssBytes: Math.max(...rounds.map(rss)),
    peers: best.peers.map((p, i) => ({ ...p, peakRssBytes: Math.max(...rounds.map((r) => r.peers[i]?.peakRssBytes ?? 0)) })),
    rounds: rounds.map((r) => ({ decodeTokensPerSecond: r.decodeTokensPerSecond, ttftShortMs: r.short.ttftMs, ttftLongMs: r.long.ttftMs, loadAverage: r.loadAverage })),
  };
}

export interface ModelReport {
  readonly name: string;
  readonly directory: string;
  readonly config: ModelConfig;
  readonly tensors: readonly { readonly name: string; readonly bytes: number }[]; // fp32 bytes
  readonly longPrompt: number;
  readonly results: readonly MeasureResult[];
  /** Configurations the bench tried but could not measure here, and why. */
  readonly unavailable: readonly UnavailableRow[];
  /** The GGUF files llama.cpp ran. */
  readonly ggufs: readonly { readonly weights: GgufWeights; readonly fileBytes: number; readonly weightBytesPerToken: number; readonly fallbacks: readonly string[] }[];
}

export interface UnavailableRow {
  readonly label: string;
  readonly reason: string;
}

export interface Row {
  readonly label: string;
  readonly kind: MeasureSpec['kind'];
  /** meshnet's weight format, or the llama.cpp GGUF type; fp32 for transformers.js. */
  readonly weights: MeshnetWeights | GgufWeights;
  /** meshnet's MatMulNBits accuracy level when the row sets one (q8/q4; absent: the default). */
  readonly accuracyLevel?: number;
  /** meshnet: the whole weight spec's name when the row names one (`--q4-specs`; absent: the format's default). */
  readonly weightSpec?: string;
  /** What ran it (llama.cpp: its build and the CPU features of the ggml backend it loaded). */
  readonly devices?: readonly string[];
  /** meshnet: packed bytes of one decoder layer in the row's format. */
  readonly packedBytesPerLayer?: number;
  readonly spinning: boolean;
  readonly meanDecodeTokensPerSecond: number;
  readonly fastestTokenMs: number;
  readonly breakdownMs?: Record<string, number>;
  readonly loadAverage: readonly [number, number];
  readonly cpuPerWall: number;
  /** Decode tokens/s of each round, in order. */
  readonly roundsTokensPerSecond: readonly number[];
  readonly decodeTokensPerSecond: number;
  readonly msPerToken: number;
  readonly ttftShortMs: number;
  readonly ttftLongMs: number;
  readonly loadMs: number;
  /** decode tokens/s ÷ one process's (a pipeline: the one process in its own weight format). */
  readonly vsOneProcess: number;
  /** decode tokens/s ÷ the fp32 one process's. */
  readonly vsFp32: number;
  /** decode tokens/s ÷ transformers.js's with the same thread spinning (fp32 rows). */
  readonly vsTransformers: number;
  /** meshnet rows: decode tokens/s ÷ llama.cpp's on the counterpart GGUF type (fp32 ↔ F32, q8 ↔ Q8_0, q4 ↔ Q4_0). */
  readonly vsLlamaCpp?: number;
  /** decode tokens/s ÷ (bandwidth ÷ weight bytes per token). */
  readonly fractionOfLimit: number;
  /** Pipelines: (ms/token − one process's ms/token) ÷ hops. */
  readonly addedMsPerHopPerToken?: number;
  /** Pipelines, decode frames: mean head-side request time per hop (peer compute included). */
  readonly hopDecodeMs?: readonly number[];
  /**
   * Pipelines, decode: each hop's request time minus what its layers cost in one process
   * (the one-process layers time × its share of layers): frames, sockets, event loops.
   */
  readonly hopOverheadMs?: readonly number[];
  /** Pipelines, decode, per hop: the peer's own ms per frame (whole frame; inside the shard run). */
  readonly peerBusyMs?: readonly (number | undefined)[];
  readonly peerRunMs?: readonly (number | undefined)[];
  /** Pipelines, per hop: median control ping round trip (socket and event loops only). */
  readonly pingMs?: readonly (number | undefined)[];
  /** Pipelines, decode: frame bytes per token per hop, head → peer and back. */
  readonly activationBytesPerTokenPerHop?: { readonly sent: number; readonly received: number };
  readonly peakRss: readonly { readonly process: string; readonly range?: [number, number]; readonly bytes: number; readonly layerBytes?: number }[];
  /** The short request's tokens equal the one-process run's. */
  readonly sameTokens: boolean;
}

export interface Target {
  readonly target: string;
  readonly measured: string;
  readonly met: boolean;
}

export interface BenchReport {
  readonly startedAt: string;
  readonly durationS: number;
  readonly quick: boolean;
  readonly threads: number;
  readonly decodeTokens: number;
  readonly repeats: number;
  /** The first of `linkDelaysMs` (kept for older readers of the JSON). */
  readonly linkDelayMs?: number;
  readonly linkDelaysMs?: readonly number[];
  readonly machine: Record<string, string | number>;
  readonly bandwidth: { readonly oneStream: number; readonly allStreams: number; readonly streams: number };
  /** Grammar-constrained sampling: mask cost per token (bench/grammar-mask.ts). */
  readonly grammarMask?: GrammarMaskReport;
  readonly llamaCpp: { readonly version: string; readonly status: 'measured' | 'skipped'; readonly reason?: string };
  readonly meshnetWeights: { readonly available: readonly MeshnetWeights[]; readonly unavailable: readonly { readonly weights: MeshnetWeights; readonly reason: string }[] };
  readonly models: readonly (ModelReport & { readonly weightBytesPerToken: number; readonly limitTokensPerSecond: number; readonly rows: readonly Row[] })[];
  readonly targets: readonly Target[];
}

export type BenchInput = Omit<BenchReport, 'models' | 'targets'> & { readonly models: readonly ModelReport[] };

const LAYER = /^model\.layers\.(\d+)\./;

/** Weight bytes one decode step reads: every matrix once; the embedding table only as the LM head (one row is gathered). */
export function weightBytesPerToken(model: Pick<ModelReport, 'config' | 'tensors'>): number {
  const all = model.tensors.reduce((sum, t) => sum + t.bytes, 0);
  if (model.config.tieWordEmbeddings) return all;
  const embed = model.tensors.find((t) => t.name === 'model.embed_tokens.weight')?.bytes ?? 0;
  return all - embed + model.config.hiddenSize * 4;
}

function layerBytes(model: ModelReport, range: [number, number]): number {
  return model.tensors.reduce((sum, t) => {
    const layer = LAYER.exec(t.name);
    return layer && Number(layer[1]) >= range[0] && Number(layer[1]) < range[1] ? sum + t.bytes : sum;
  }, 0);
}

const weightsOf = (spec: MeasureSpec): MeshnetWeights | GgufWeights => (spec.kind === 'llama-cpp' ? spec.ggufWeights : spec.kind === 'transformers' ? 'fp32' : (spec.weights ?? 'fp32'));

export const rowLabel = (spec: MeasureSpec) => {
  if (spec.kind === 'llama-cpp') return `llama.cpp ${spec.ggufWeights}${spec.cpuVariant ? `, ${spec.cpuVariant} kernels` : ''}`;
  const level = spec.accuracyLevel !== undefined ? ` level ${spec.accuracyLevel}` : '';
  const weights = spec.kind === 'transformers' || (spec.weights ?? 'fp32') === 'fp32' ? '' : `, ${spec.weightSpec ?? spec.weights}${level}`;
  return spec.kind === 'pipeline'
    ? `${spec.peers} peers, ${spec.link}${spec.linkDelayMs ? `, +${spec.linkDelayMs} ms RTT` : ''}${weights}`
    : `${spec.kind === 'one-process' ? 'meshnet, one process' : 'transformers.js'}${spec.spinning ? ', spinning' : ''}${weights}`;
};

/** The one-process meshnet fp32 row with spinning off: every ratio's baseline. */
const isBaseline = (r: MeasureResult) => r.spec.kind === 'one-process' && !r.spec.spinning && (r.spec.weights ?? 'fp32') === 'fp32';

/** A row in this weight format, accuracy level and named spec (meshnet rows). */
const sameWeights = (a: MeasureSpec, b: MeasureSpec) => weightsOf(a) === weightsOf(b) && a.accuracyLevel === b.accuracyLevel && a.weightSpec === b.weightSpec;

function rows(model: ModelReport, limit: number): Row[] {
  const one = model.results.find(isBaseline);
  // Pipelines and same tokens: against the one process in the same weight format.
  const oneLike = (spec: MeasureSpec) => model.results.find((r) => r.spec.kind === 'one-process' && !r.spec.spinning && sameWeights(r.spec, spec));
  // The counterpart: llama.cpp on its best CPU backend (not an `--llama-cpp-avx2` row).
  const llama = (weights: GgufWeights) => model.results.find((r) => r.spec.kind === 'llama-cpp' && r.spec.ggufWeights === weights && r.spec.cpuVariant === undefined);
  // Against transformers.js with the same thread spinning.
  const tjs = (spinning: boolean) => model.results.find((r) => r.spec.kind === 'transformers' && r.spec.spinning === spinning);
  const all = model.tensors.reduce((sum, t) => sum + t.bytes, 0);
  const fp32PerToken = weightBytesPerToken(model);
  return model.results.map((r) => {
    const tps = r.decodeTokensPerSecond;
    const hops = r.hops.length;
    const decodeFrames = r.hops.reduce((s, h) => s + h.decodeFrames, 0);
    const weights = weightsOf(r.spec);
    const meshnet = r.spec.kind === 'one-process' || r.spec.kind === 'pipeline';
    const counterpart = meshnet && r.spec.accuracyLevel === undefined ? llama(LLAMA_CPP_COUNTERPART[weights as MeshnetWeights]) : undefined;
    const same = r.spec.kind === 'pipeline' ? oneLike(r.spec) : one;
    // A peer's layer bytes: packed in the row's compact format (the artifacts'), else the checkpoint's fp32.
    const compact = r.packed && weights !== 'fp32' ? r.packed : undefined;
    const peerLayerBytes = (range: [number, number]) => (compact ? (range[1] - range[0]) * compact.bytesPerLayer : layerBytes(model, range));
    return {
      label: rowLabel(r.spec),
      kind: r.spec.kind,
      weights,
      ...(r.spec.accuracyLevel !== undefined ? { accuracyLevel: r.spec.accuracyLevel } : {}),
      ...(r.spec.weightSpec !== undefined ? { weightSpec: r.spec.weightSpec } : {}),
      ...(r.devices ? { devices: r.devices } : {}),
      ...(r.packed ? { packedBytesPerLayer: r.packed.bytesPerLayer } : {}),
      spinning: r.spec.spinning,
      meanDecodeTokensPerSecond: r.meanDecodeTokensPerSecond,
      fastestTokenMs: r.fastestTokenMs,
      breakdownMs: r.breakdownMs,
      loadAverage: r.loadAverage,
      cpuPerWall: r.cpuPerWall,
      roundsTokensPerSecond: (r.rounds ?? [r]).map((x) => x.decodeTokensPerSecond),
      decodeTokensPerSecond: tps,
      msPerToken: 1000 / tps,
      ttftShortMs: r.short.ttftMs,
      ttftLongMs: r.long.ttftMs,
      loadMs: r.loadMs,
      vsOneProcess: same ? tps / same.decodeTokensPerSecond : NaN,
      vsFp32: one ? tps / one.decodeTokensPerSecond : NaN,
      vsTransformers: weights === 'fp32' && r.spec.kind !== 'llama-cpp' ? tps / (tjs(r.spec.spinning)?.decodeTokensPerSecond ?? NaN) : NaN,
      ...(counterpart ? { vsLlamaCpp: tps / counterpart.decodeTokensPerSecond } : {}),
      // Against the bandwidth limit of the bytes this configuration reads (a GGUF's, or the fp32 checkpoint's).
      fractionOfLimit: tps / (r.weightBytesPerToken ? (limit * fp32PerToken) / r.weightBytesPerToken : limit),
      ...(r.spec.kind === 'pipeline' && same && hops > 0
        ? {
            addedMsPerHopPerToken: (1000 / tps - 1000 / same.decodeTokensPerSecond) / hops,
            hopDecodeMs: r.hops.map((h) => (h.decodeFrames ? h.decodeMs / h.decodeFrames : 0)),
            hopOverheadMs: same.breakdownMs?.layers === undefined
              ? undefined
              : r.hops.map((h) => (h.decodeFrames ? h.decodeMs / h.decodeFrames : 0) - (same.breakdownMs!.layers * ((h.range?.[1] ?? 0) - (h.range?.[0] ?? 0))) / model.config.numLayers),
            peerBusyMs: r.hops.map((h) => h.peerBusyMs),
            peerRunMs: r.hops.map((h) => h.peerRunMs),
            pingMs: r.hops.map((h) => h.pingMs),
            activationBytesPerTokenPerHop: {
              sent: r.hops.reduce((s, h) => s + h.decodeSentBytes, 0) / decodeFrames,
              received: r.hops.reduce((s, h) => s + h.decodeReceivedBytes, 0) / decodeFrames,
            },
          }
        : {}),
      peakRss: [
        {
          process: r.spec.kind === 'pipeline' ? 'head' : 'process',
          bytes: r.peakRssBytes,
          ...(r.spec.kind === 'pipeline' ? {} : { layerBytes: r.spec.kind === 'llama-cpp' ? undefined : compact ? model.config.numLayers * compact.bytesPerLayer + compact.headBytes : all }),
        },
        ...r.peers.map((p) => ({ process: p.id, range: p.range, bytes: p.peakRssBytes, layerBytes: p.range ? peerLayerBytes(p.range) : undefined })),
      ],
      // meshnet rows: the one process of the same format (a compact format's tokens may differ from fp32's).
      sameTokens: (meshnet ? oneLike(r.spec) : one) ? JSON.stringify(r.short.tokenIds) === JSON.stringify((meshnet ? oneLike(r.spec) : one)!.short.tokenIds) : true,
    };
  });
}

const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
const MiB = 2 ** 20;

/** The 1B-shaped models run in compact formats only (bench/run.ts). */
const isBandwidthBound = (name: string) => name.startsWith('llama-3.2-1b') || name.startsWith('gemma-3-1b');

function targets(models: BenchReport['models']): Target[] {
  const out: Target[] = [];
  // The SmolLM2-shaped model's targets, or the last model's when it is not in the run — never a
  // bandwidth-bound model's (their targets are below; a q8 row they do not run is not a miss).
  const smol: { readonly name: string; readonly rows: readonly Row[]; readonly unavailable: readonly UnavailableRow[] } = models.find((m) => m.name.startsWith('smollm2')) ?? models.filter((m) => !isBandwidthBound(m.name)).at(-1) ?? { name: '', rows: [], unavailable: [] };
  const loopback = (row: Row) => row.kind === 'pipeline' && !row.label.includes('RTT');
  for (const row of smol.rows.filter(loopback)) {
    out.push({ target: `${smol.name}, ${row.label}: ≥ 90% of one-process decode tokens/s`, measured: pct(row.vsOneProcess), met: row.vsOneProcess >= 0.9 });
  }
  for (const model of models) {
    const added = model.rows.filter(loopback).map((r) => r.addedMsPerHopPerToken ?? 0);
    if (added.length) {
      const worst = Math.max(...added);
      out.push({ target: `${model.name}: added latency per Node↔Node hop on loopback < 1 ms per token`, measured: `${added.map((a) => a.toFixed(2)).join(' / ')} ms (worst ${worst.toFixed(2)})`, met: worst < 1 });
    }
  }
  for (const model of models) {
    for (const one of model.rows.filter((r) => r.kind === 'one-process' && Number.isFinite(r.vsTransformers))) {
      const how = one.spinning ? 'both with thread spinning' : 'both with spinning off';
      out.push({ target: `${model.name}: one-process meshnet ≥ transformers.js (decode tokens/s, ${how})`, measured: `${one.vsTransformers.toFixed(2)}×`, met: one.vsTransformers >= 1 });
    }
  }
  // Against llama.cpp on the same weights and threads (issue #12), one process, decode tokens/s.
  for (const [weights, minimum] of smol.name ? ([['q4', 0.8], ['q8', 0.8]] as const) : []) {
    const counterpart = LLAMA_CPP_COUNTERPART[weights];
    const ours = smol.rows.find((r) => r.kind === 'one-process' && !r.spinning && r.weights === weights && r.accuracyLevel === undefined);
    const theirs = smol.rows.find((r) => r.label === `llama.cpp ${counterpart}`);
    const why = (label: string) => smol.unavailable.find((u) => u.label === label)?.reason ?? 'not measured';
    const target = `${smol.name}: meshnet ${weights} ≥ ${minimum}× llama.cpp ${counterpart} (decode tokens/s, one process, same threads)`;
    if (ours && theirs) {
      const ratio = ours.decodeTokensPerSecond / theirs.decodeTokensPerSecond;
      out.push({ target, measured: `${ratio.toFixed(2)}× (${ours.decodeTokensPerSecond.toFixed(1)} / ${theirs.decodeTokensPerSecond.toFixed(1)} tok/s)`, met: ratio >= minimum });
    } else {
      const missing = [...(ours ? [] : [`meshnet ${weights}: ${why(`meshnet, one process, ${weights}`)}`]), ...(theirs ? [] : [`llama.cpp ${counterpart}: ${why(`llama.cpp ${counterpart}`)}`])];
      out.push({ target, measured: missing.join('; '), met: false });
    }
  }
  // The bandwidth-bound models (issue #24: Llama-3.2-1B-shaped, q8 and q4; issue #22:
  // Gemma-3-1B-shaped, q4): ≥ 0.9× llama.cpp's Q8_0 / Q4_0, one process (each named q4 spec
  // of `--q4-specs` a target of its own); 2 peers ≥ 90% of the one process in their spec.
  for (const model of models.filter((m) => isBandwidthBound(m.name))) {
    for (const weights of model.name.startsWith('gemma') ? (['q4'] as const) : (['q4', 'q8'] as const)) {
      const counterpart = LLAMA_CPP_COUNTERPART[weights];
      const ours = model.rows.filter((r) => r.kind === 'one-process' && r.weights === weights && r.accuracyLevel === undefined);
      const theirs = model.rows.find((r) => r.label === `llama.cpp ${counterpart}`);
      const peers = model.rows.find((r) => loopback(r) && r.weights === weights);
      for (const one of ours.length ? ours : [undefined]) {
        const target = `${model.name}: meshnet ${one?.weightSpec ?? weights} ≥ 0.9× llama.cpp ${counterpart} (decode tokens/s, one process, same threads)`;
        if (one && theirs) {
          const ratio = one.decodeTokensPerSecond / theirs.decodeTokensPerSecond;
          out.push({ target, measured: `${ratio.toFixed(2)}× (${one.decodeTokensPerSecond.toFixed(1)} / ${theirs.decodeTokensPerSecond.toFixed(1)} tok/s)`, met: ratio >= 0.9 });
        } else out.push({ target, measured: `not measured (${[one ? '' : `meshnet ${weights}`, theirs ? '' : `llama.cpp ${counterpart}`].filter(Boolean).join(', ')})`, met: false });
      }
      if (peers) out.push({ target: `${model.name}, ${peers.label}: ≥ 90% of one-process decode tokens/s`, measured: pct(peers.vsOneProcess), met: peers.vsOneProcess >= 0.9 });
    }
  }
  // Compact weights (issue #12), meshnet's side: q4 speed in one process, q4 peers' memory.
  const oneOf = (weights: string) => smol.rows.find((r) => r.kind === 'one-process' && !r.spinning && r.weights === weights && r.accuracyLevel === undefined);
  const fp32One = oneOf('fp32');
  const q4One = oneOf('q4');
  if (fp32One && q4One) {
    const ratio = q4One.decodeTokensPerSecond / fp32One.decodeTokensPerSecond;
    out.push({ target: `${smol.name}: q4 one-process decode tokens/s ≥ 3× fp32`, measured: `${ratio.toFixed(2)}× (${q4One.decodeTokensPerSecond.toFixed(1)} vs ${fp32One.decodeTokensPerSecond.toFixed(1)} tok/s)`, met: ratio >= 3 });
  }
  // A peer's RSS growth over the same peer holding (almost) nothing: the same 2-peer relay
  // pipeline's peers serving stories260k (fp32, about 0.5 MiB of layers each).
  const idle = models.find((m) => m.name === 'stories260k')?.rows.find((r) => r.kind === 'pipeline' && r.label === '2 peers, relay');
  const q4Peers = smol.rows.find((r) => loopback(r) && r.weights === 'q4' && r.label.startsWith('2 peers, relay'));
  if (idle && q4Peers) {
    const peers = q4Peers.peakRss.filter((p) => p.layerBytes !== undefined && p.process !== 'head');
    const growth = peers.map((p) => ({ ...p, growth: p.bytes - (idle.peakRss.find((b) => b.process === p.process)?.bytes ?? NaN) }));
    out.push({
      target: `${smol.name}, ${q4Peers.label}: each peer's peak RSS growth over the same peer serving stories260k ≤ 1.1 × its q4 layer bytes + 50 MiB`,
      measured: growth.map((p) => `${p.process} [${p.range?.join(', ')}): +${(p.growth / MiB).toFixed(0)} MiB for ${(p.layerBytes! / MiB).toFixed(1)} MiB of q4 layers (limit ${((1.1 * p.layerBytes!) / MiB + 50).toFixed(0)})`).join('; '),
      met: growth.length > 0 && growth.every((p) => p.growth <= 1.1 * p.layerBytes! + 50 * MiB),
    });
  }
  // Memory follows the layer share: a peer's peak RSS is its layers' weights plus a runtime
  // baseline, not the whole model. Allowance: 1.5 × its layer bytes + 200 MiB (fp32 weights;
  // the compact formats have the growth target above).
  for (const row of smol.rows.filter((r) => loopback(r) && r.weights === 'fp32')) {
    const peers = row.peakRss.filter((p) => p.layerBytes !== undefined && p.process !== 'process');
    const ok = peers.every((p) => p.bytes <= 1.5 * p.layerBytes! + 200 * MiB);
    out.push({
      target: `${smol.name}, ${row.label}: each peer's peak RSS follows its share of layers`,
      measured: peers.map((p) => `${p.process} [${p.range?.join(', ')}): ${(p.bytes / MiB).toFixed(0)} MiB for ${(p.layerBytes! / MiB).toFixed(0)} MiB of layers`).join('; '),
      met: peers.length > 0 && ok,
    });
  }
  return out;
}

export function summarize(input: BenchInput): BenchReport {
  const models = input.models.map((model) => {
    const perToken = weightBytesPerToken(model);
    const limitTokensPerSecond = input.bandwidth.allStreams / perToken;
    return { ...model, weightBytesPerToken: perToken, limitTokensPerSecond, rows: rows(model, limitTokensPerSecond) };
  });
  return { ...input, models, targets: targets(models) };
}
