/**
 * The bench report's weight formats and llama.cpp rows, on plain data (bench/report.ts is
 * pure): meshnet formats plug in by name from `meshnet generate --help`, a format this build
 * lacks becomes a "not available" target line rather than a missing or fp32-labelled row,
 * and each meshnet format is held against llama.cpp's counterpart type.
 */
import { describe, expect, it } from 'vitest';
import type { MeasureResult, MeasureSpec } from '../../bench/measure.ts';
import { meshnetWeightOptions, weightsInUsage } from '../../bench/meshnet-weights.ts';
import { renderMarkdown } from '../../bench/report-markdown.ts';
import { summarize, type BenchInput, type ModelReport } from '../../bench/report.ts';

const common = { model: 'm', threads: 2, spinning: false, repeats: 1, decodeTokens: 8, longPrompt: 16 };

function result(spec: MeasureSpec, tokensPerSecond: number, rssMiB = 300, weightBytesPerToken?: number): MeasureResult {
  const timing = { promptTokens: 32, ttftMs: 10, tokenTimesMs: [10, 20], tokenIds: [5, 6] };
  return {
    spec,
    loadMs: 1,
    short: timing,
    long: { ...timing, promptTokens: 16, tokenTimesMs: [30], tokenIds: [5] },
    decodeTokensPerSecond: tokensPerSecond,
    meanDecodeTokensPerSecond: tokensPerSecond,
    fastestTokenMs: 1000 / tokensPerSecond,
    loadAverage: [1, 1],
    cpuPerWall: 1,
    peakRssBytes: rssMiB * 2 ** 20,
    peers: [],
    hops: [],
    ...(weightBytesPerToken ? { weightBytesPerToken } : {}),
  };
}

const llamaSpec = (ggufWeights: 'F32' | 'Q8_0' | 'Q4_0'): MeasureSpec => ({ ...common, kind: 'llama-cpp', gguf: `m-${ggufWeights}.gguf`, ggufWeights, moduleDir: '.', vocabSize: 64, contextSize: 64, weightBytesPerToken: 1000 });

function input(results: MeasureResult[], unavailable: ModelReport['unavailable']): BenchInput {
  const model: ModelReport = {
    name: 'smollm2-135m-shaped',
    directory: 'm',
    config: { architecture: 'LlamaForCausalLM', hiddenSize: 8, intermediateSize: 16, numLayers: 2, numHeads: 2, numKvHeads: 1, headDim: 4, vocabSize: 64, maxPositionEmbeddings: 64, rmsNormEps: 1e-5, rope: { theta: 10000 }, tieWordEmbeddings: true, attentionBias: false, qkNorm: false, eosTokenIds: [2] },
    tensors: [{ name: 'model.embed_tokens.weight', bytes: 4000 }],
    longPrompt: 16,
    results,
    unavailable,
    ggufs: [{ weights: 'Q4_0', fileBytes: 2 ** 20, weightBytesPerToken: 1000, fallbacks: [] }],
  };
  return {
    startedAt: 't',
    durationS: 1,
    quick: true,
    threads: 2,
    decodeTokens: 8,
    repeats: 1,
    machine: { cpus: 2, cpuModel: 'cpu', totalMemoryBytes: 2 ** 30, node: 'v20', platform: 'linux' },
    bandwidth: { oneStream: 1e9, allStreams: 2e9, streams: 2 },
    llamaCpp: { version: '3.22.1', status: 'measured' },
    meshnetWeights: { available: ['fp32'], unavailable: [] },
    models: [model],
  };
}

describe('meshnet weight formats in the bench', () => {
  it('are read from the generate usage text; fp32 is always there', () => {
    expect(weightsInUsage('  --dtype fp32|fp16    activation dtype')).toEqual(['fp32']);
    expect(weightsInUsage('  --weights fp32|fp16|q8|q4   weight format')).toEqual(['fp32', 'fp16', 'q8', 'q4']);
    expect(weightsInUsage('  --weights fp32|q4  ')).toEqual(['fp32', 'q4']);
    expect(meshnetWeightOptions('fp32')).toEqual({});
    expect(meshnetWeightOptions(undefined)).toEqual({});
    expect(meshnetWeightOptions('q4')).toEqual({ weights: 'q4' });
  });
});

describe('bench report against llama.cpp', () => {
  it('holds each meshnet format against its llama.cpp type, and names a missing one', () => {
    const report = summarize(
      input(
        [result({ ...common, kind: 'one-process' }, 30), result({ ...common, kind: 'one-process', weights: 'q4' }, 120), result(llamaSpec('F32'), 40, 700, 4000), result(llamaSpec('Q8_0'), 110), result(llamaSpec('Q4_0'), 140, 350)],
        [{ label: 'meshnet, one process, q8', reason: 'not available in this build (meshnet has no --weights yet)' }],
      ),
    );
    const rows = report.models[0].rows;
    expect(rows.map((r) => r.label)).toEqual(['meshnet, one process', 'meshnet, one process, q4', 'llama.cpp F32', 'llama.cpp Q8_0', 'llama.cpp Q4_0']);
    expect(rows[0].vsLlamaCpp).toBeCloseTo(30 / 40);
    expect(rows[1].vsLlamaCpp).toBeCloseTo(120 / 140);
    expect(rows[2].vsLlamaCpp).toBeUndefined();
    // A llama.cpp row's bandwidth fraction uses its own bytes per token.
    expect(rows[4].fractionOfLimit).toBeCloseTo(140 / (2e9 / 1000));
    const q4 = report.targets.find((t) => t.target.includes('meshnet q4 ≥ 0.8× llama.cpp Q4_0'))!;
    expect(q4).toMatchObject({ met: true });
    expect(q4.measured).toContain('0.86×');
    const q8 = report.targets.find((t) => t.target.includes('meshnet q8 ≥ 0.8× llama.cpp Q8_0'))!;
    expect(q8).toMatchObject({ met: false, measured: 'meshnet q8: not available in this build (meshnet has no --weights yet)' });
    const markdown = renderMarkdown(report);
    expect(markdown).toContain('Against llama.cpp');
    expect(markdown).toMatch(/\| q4 \| 120\.0 \| Q4_0 \| 140\.0 \| 0\.86× \|/);
    expect(markdown).toContain('- meshnet, one process, q8: not available in this build');
  });

  it('says why llama.cpp rows are missing', () => {
    const base = input([result({ ...common, kind: 'one-process', weights: 'q4' }, 120), result({ ...common, kind: 'one-process' }, 30)], [{ label: 'llama.cpp Q4_0', reason: 'skipped: npm install failed' }]);
    const report = summarize({ ...base, llamaCpp: { version: '3.22.1', status: 'skipped', reason: 'npm install failed' } });
    expect(report.targets.find((t) => t.target.includes('Q4_0'))).toMatchObject({ met: false, measured: 'llama.cpp Q4_0: skipped: npm install failed' });
    expect(renderMarkdown(report)).toContain('llama.cpp rows skipped: npm install failed.');
  });
});
