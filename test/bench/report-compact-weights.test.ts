/**
 * The bench report's compact-weight figures, from plain results: rows per format, pipelines
 * against the one process of their own format, the q4 speed target against fp32, and the q4
 * peers' RSS growth over the stories260k peers measured against their packed layer bytes.
 */
import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../src/core/model/types.ts';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';
import type { MeasureResult, MeasureSpec } from '../../bench/measure.ts';
import { summarize, type ModelReport } from '../../bench/report.ts';
import { renderMarkdown } from '../../bench/report-markdown.ts';
import { parseQ4Specs } from '../../bench/meshnet-weights.ts';

const MiB = 2 ** 20;
const config = { numLayers: 30, hiddenSize: 576, numHeads: 9, numKvHeads: 3, vocabSize: 49152, tieWordEmbeddings: true } as ModelConfig;
const common = { model: 'm', threads: 2, spinning: false, repeats: 1, decodeTokens: 8, longPrompt: 16 };

function result(spec: MeasureSpec, tps: number, extra: Partial<MeasureResult> = {}): MeasureResult {
  const timing = { promptTokens: 32, ttftMs: 10, tokenTimesMs: [10, 20], tokenIds: [1, 2] };
  return { spec, loadMs: 1, short: timing, long: timing, decodeTokensPerSecond: tps, meanDecodeTokensPerSecond: tps, fastestTokenMs: 1, loadAverage: [1, 1], cpuPerWall: 1, peakRssBytes: 500 * MiB, peers: [], hops: [], ...extra };
}

const packed = (format: 'fp32' | 'q4', bytesPerLayer: number) => ({ weights: weightSpec('fp32', { format }), bytesPerLayer, headBytes: 2 * MiB, lmHeadBytes: MiB });
const hop = (peerId: string) => ({ peerId, frames: 8, sentBytes: 0, receivedBytes: 0, totalMs: 8, decodeFrames: 8, decodeMs: 8, decodeSentBytes: 8 * 2352, decodeReceivedBytes: 8 * 2352, hopMeanMs: 1 });

function model(name: string, results: MeasureResult[]): ModelReport {
  return { name, directory: name, config, tensors: [{ name: 'model.layers.0.mlp.up_proj.weight', bytes: 14 * MiB }], longPrompt: 16, results, unavailable: [], ggufs: [] };
}

describe('bench report, compact weights', () => {
  const peers = (growthMiB: number) => [
    { id: 'local-1', range: [0, 15] as [number, number], peakRssBytes: (235 + growthMiB) * MiB },
    { id: 'local-2', range: [15, 30] as [number, number], peakRssBytes: (235 + growthMiB) * MiB },
  ];
  const report = (q4Tps: number, growthMiB: number) =>
    summarize({
      startedAt: 'now',
      durationS: 1,
      quick: true,
      threads: 2,
      decodeTokens: 8,
      repeats: 1,
      machine: {},
      bandwidth: { oneStream: 1e10, allStreams: 2e10, streams: 2 },
      llamaCpp: { version: '—', status: 'skipped', reason: 'not in this test' },
      meshnetWeights: { available: ['fp32', 'fp16', 'q8', 'q4'], unavailable: [] },
      models: [
        model('stories260k', [result({ ...common, kind: 'pipeline', peers: 2, link: 'relay', linkDelayMs: 0 }, 400, { peers: peers(0), hops: [hop('local-1'), hop('local-2')] })]),
        model('smollm2-135m-shaped', [
          result({ ...common, kind: 'one-process' }, 30, { packed: packed('fp32', 14 * MiB) }),
          result({ ...common, kind: 'one-process', weights: 'q4' }, q4Tps, { packed: packed('q4', 2.2 * MiB) }),
          result({ ...common, kind: 'pipeline', peers: 2, link: 'relay', linkDelayMs: 0, weights: 'q4' }, q4Tps * 0.95, { packed: packed('q4', 2.2 * MiB), peers: peers(growthMiB), hops: [hop('local-1'), hop('local-2')] }),
        ]),
      ],
    });

  it('labels rows by format, and measures a q4 pipeline against the q4 one process', () => {
    const rows = report(100, 60).models[1].rows;
    expect(rows.map((r) => r.label)).toEqual(['meshnet, one process', 'meshnet, one process, q4', '2 peers, relay, q4']);
    const pipeline = rows[2];
    expect(pipeline.vsOneProcess).toBeCloseTo(0.95);
    expect(pipeline.vsFp32).toBeCloseTo(95 / 30);
    expect(pipeline.peakRss.find((p) => p.process === 'local-1')?.layerBytes).toBeCloseTo(15 * 2.2 * MiB);
  });

  it('q4 ≥ 3× fp32 and the q4 peers\' RSS growth over stories260k peers ≤ 1.1 × their q4 bytes + 50 MiB', () => {
    const met = (r: ReturnType<typeof report>, prefix: RegExp) => r.targets.find((t) => prefix.test(t.target))!;
    expect(met(report(100, 60), /q4 one-process decode/).met).toBe(true);
    expect(met(report(80, 60), /q4 one-process decode/).met).toBe(false);
    // 15 layers × 2.2 MiB = 33 MiB of q4 per peer: the limit is 1.1 × 33 + 50 = 86.3 MiB.
    const growth = (g: number) => met(report(100, g), /peak RSS growth over the same peer serving stories260k/);
    expect(growth(80).met).toBe(true);
    expect(growth(90).met).toBe(false);
    expect(growth(80).measured).toMatch(/local-1 \[0, 15\): \+80 MiB for 33\.0 MiB of q4 layers \(limit 86\)/);
  });

  it('--q4-specs: one q4 row and one llama.cpp target per named spec; the 2 peers against the one process of their own spec', () => {
    expect(parseQ4Specs('q4-b32-acc4,q4-b64-acc4')).toEqual(['q4-b32-acc4', 'q4-b64-acc4']);
    expect(parseQ4Specs(undefined)).toBeUndefined();
    expect(() => parseQ4Specs('q4-b64')).toThrow(/not a q4 weight spec name/);
    expect(() => parseQ4Specs('q8-b32-acc4')).toThrow(/not a q4 weight spec name/);
    expect(() => parseQ4Specs('q4-b64-acc4,q4-b64-acc4')).toThrow(/twice/);
    const named = (weightSpec: string) => ({ ...common, weights: 'q4' as const, weightSpec });
    const llama = { ...common, kind: 'llama-cpp' as const, gguf: 'g', ggufWeights: 'Q4_0' as const, moduleDir: 'd', vocabSize: 262144, contextSize: 128, weightBytesPerToken: 1 };
    const r = summarize({
      startedAt: 'now', durationS: 1, quick: true, threads: 1, decodeTokens: 8, repeats: 1, machine: {},
      bandwidth: { oneStream: 1e10, allStreams: 2e10, streams: 2 },
      llamaCpp: { version: '—', status: 'measured' },
      meshnetWeights: { available: ['fp32', 'fp16', 'q8', 'q4'], unavailable: [] },
      models: [
        model('gemma-3-1b-shaped', [
          result({ ...named('q4-b32-acc4'), kind: 'one-process' }, 17, { packed: packed('q4', 10 * MiB) }),
          result({ ...named('q4-b64-acc4'), kind: 'one-process' }, 20, { packed: packed('q4', 9 * MiB) }),
          result({ ...named('q4-b64-acc4'), kind: 'pipeline', peers: 2, link: 'relay', linkDelayMs: 0 }, 19, { packed: packed('q4', 9 * MiB), hops: [hop('local-1'), hop('local-2')] }),
          result(llama, 20),
          result({ ...llama, moduleDir: 'd-avx2', cpuVariant: 'avx2' }, 8, { devices: ['llama.cpp prebuilt CPU (AVX AVX2 F16C FMA), 1 threads, context 128'] }),
        ]),
      ],
    });
    const rows = r.models[0].rows;
    expect(rows.map((row) => row.label)).toEqual(['meshnet, one process, q4-b32-acc4', 'meshnet, one process, q4-b64-acc4', '2 peers, relay, q4-b64-acc4', 'llama.cpp Q4_0', 'llama.cpp Q4_0, avx2 kernels']);
    expect(rows[2].vsOneProcess).toBeCloseTo(0.95);
    expect(rows[0].vsLlamaCpp).toBeCloseTo(0.85);
    const target = (spec: string) => r.targets.find((t) => t.target.startsWith(`gemma-3-1b-shaped: meshnet ${spec} ≥ 0.9× llama.cpp Q4_0`))!;
    expect(target('q4-b32-acc4').met).toBe(false);
    expect(target('q4-b64-acc4')).toMatchObject({ met: true, measured: '1.00× (20.0 / 20.0 tok/s)' });
    expect(r.targets.filter((t) => t.target === 'gemma-3-1b-shaped, 2 peers, relay, q4-b64-acc4: ≥ 90% of one-process decode tokens/s').map((t) => t.met)).toEqual([true]);
    // Alone in a run, a bandwidth-bound model takes none of the SmolLM2-shaped model's targets (q8, ≥ 0.8×).
    expect(r.targets.filter((t) => /q8|0\.8×/.test(t.target))).toEqual([]);
    const markdown = renderMarkdown(r);
    expect(markdown).toMatch(/\| q4-b32-acc4 \| 17\.0 \| Q4_0 \| 20\.0 \| 0\.85× \|/);
    expect(markdown).toMatch(/\| q4-b64-acc4 \| 20\.0 \| Q4_0 \| 20\.0 \| 1\.00× \|/);
    // --llama-cpp-avx2: beside the table, never the counterpart.
    expect(markdown).toContain('llama.cpp Q4_0, avx2 kernels (its CPU backends up to AVX2 only): 8.0 tok/s; meshnet q4-b32-acc4 ÷ it 2.13×; meshnet q4-b64-acc4 ÷ it 2.50×.');
    expect(markdown).toContain('- llama.cpp Q4_0, avx2 kernels: llama.cpp prebuilt CPU (AVX AVX2 F16C FMA), 1 threads, context 128');
  });
});
