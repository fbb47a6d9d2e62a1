/**
 * Quality of the compact formats on a trained model (test/fixtures/models/aidreams260k) and on
 * the random fixtures, by teacher forcing (each position's logits given the true prefix):
 *
 * - perplexity of text the fp32 model samples from seeds 1–8 (temperature 1, from `<s>`,
 *   up to its 128-token context) under fp32, fp16 and q8/q4 at accuracy levels 0 and 4;
 * - the fast level's (4) top-1 agreement with the exact level (0).
 *
 * Measured on this machine (onnxruntime-node 1.30, CPU; see the issue note), and bounded here
 * with a margin: fp32 5.685, fp16 5.685, q8 5.687 / 5.689, q4 5.882 / 5.890 (level 0 / 4,
 * block 32); level 4 agrees with level 0 at 99.0–99.1% of 4096 aidreams positions (seeds 1–32;
 * this test takes seeds 1–16) and 98.0–99.3% of 1616 positions on each random fixture (this
 * test takes 4 sequences), whose logits are so flat that 3–6% of positions have a top-2
 * margin under 0.02 (fp16 activations agree at 99.94% there).
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { weightSpec, type AccuracyLevel, type WeightSpec } from '../../src/core/model/quant/weight-format.ts';
import type { ActivationDtype } from '../../src/core/model/activations.ts';
import { openLocalModel, type LocalModel } from '../../src/node/local-model.ts';
import { TINY_PRESETS } from '../fixtures/checkpoints.ts';
import { fixtureModel, pipeline, tempDir } from '../engine/harness.ts';
import { forcedLogits, negativeLogLikelihoods, perplexity, sampleSequence, topOneAgreement } from './teacher-forcing.ts';

const AIDREAMS = path.resolve(import.meta.dirname, '../fixtures/models/aidreams260k');

let root: { dir: string; remove: () => Promise<void> };
let model: LocalModel;
let texts: number[][]; // seeds 1–16; the perplexity table uses 1–8
beforeAll(async () => {
  root = await tempDir('quality');
  process.env.MESHNET_HOME = root.dir;
  model = await openLocalModel(AIDREAMS);
  const p = await pipeline(model, [{ start: 0, end: model.checkpoint.config.numLayers }]);
  texts = [];
  for (let seed = 1; seed <= 16; seed++) texts.push(await sampleSequence(p, seed, model.checkpoint.config.maxPositionEmbeddings - 1));
  await p.dispose();
});
afterAll(() => root.remove());

async function forced(m: LocalModel, sequences: number[][], spec: WeightSpec, dtype: ActivationDtype = 'fp32'): Promise<Float32Array[][]> {
  const p = await pipeline(m, [{ start: 0, end: m.checkpoint.config.numLayers }], 'cpu', dtype, spec);
  try {
    const out: Float32Array[][] = [];
    for (const ids of sequences) out.push(await forcedLogits(p, ids));
    return out;
  } finally {
    await p.dispose();
  }
}

function agreement(a: Float32Array[][], b: Float32Array[][]): number {
  let same = 0;
  let total = 0;
  a.forEach((logits, i) => {
    const r = topOneAgreement(logits, b[i]);
    same += r.same;
    total += r.total;
  });
  return same / total;
}

const ppl = (logits: Float32Array[][], sequences: number[][]) => perplexity(sequences.flatMap((ids, i) => negativeLogLikelihoods(logits[i], ids)));

describe('aidreams260k perplexity by weight format (text the fp32 model samples from seeds 1–8)', () => {
  it('fp16, q8 and q4 at both accuracy levels stay within their bounds of fp32', async () => {
    const seeds = texts.slice(0, 8);
    const q = (format: 'q8' | 'q4', accuracyLevel: AccuracyLevel) => weightSpec('fp32', { format, blockSize: 32, accuracyLevel });
    const rows: [string, WeightSpec, ActivationDtype, number][] = [
      ['fp32', weightSpec('fp32'), 'fp32', 1],
      ['fp16 weights, fp32 activations', weightSpec('fp32', { format: 'fp16' }), 'fp32', 1.002],
      ['fp16 weights, fp16 activations', weightSpec('fp16'), 'fp16', 1.002],
      ['q8 level 0', q('q8', 0), 'fp32', 1.005],
      ['q8 level 4', q('q8', 4), 'fp32', 1.005],
      ['q4 level 0', q('q4', 0), 'fp32', 1.05],
      ['q4 level 4', q('q4', 4), 'fp32', 1.05],
    ];
    const table: string[] = [];
    let base = 0;
    for (const [name, spec, dtype, bound] of rows) {
      const value = ppl(await forced(model, seeds, spec, dtype), seeds);
      if (name === 'fp32') base = value;
      table.push(`${name}: ${value.toFixed(4)} (× ${(value / base).toFixed(4)} of fp32, bound × ${bound})`);
      expect(value / base, name).toBeLessThanOrEqual(bound);
    }
    console.log(`aidreams260k perplexity over ${seeds.reduce((n, s) => n + s.length - 1, 0)} tokens:\n${table.join('\n')}`);
    expect(base).toBeGreaterThan(3); // a trained model on its own samples: well above 1, far below the vocabulary (512)
    expect(base).toBeLessThan(8);
  });
});

describe('accuracy level 4 (int8 activations) against level 0 (exact), teacher-forced top-1', () => {
  for (const format of ['q4', 'q8'] as const) {
    it(`${format}: aidreams260k, seeds 1–16 (2048 positions)`, async () => {
      const exact = await forced(model, texts, weightSpec('fp32', { format, accuracyLevel: 0 }));
      const fast = await forced(model, texts, weightSpec('fp32', { format, accuracyLevel: 4 }));
      const rate = agreement(exact, fast);
      console.log(`aidreams260k ${format}: level 4 agrees with level 0 at ${(100 * rate).toFixed(2)}%`);
      expect(rate).toBeGreaterThanOrEqual(0.985);
      expect(rate).toBeLessThan(1); // level 4 really runs int8 activations
    });
  }

  it('q4 and q8 on every fixture architecture (4 sampled sequences each)', async () => {
    const lines: string[] = [];
    for (const [name, preset] of Object.entries(TINY_PRESETS)) {
      const fixture = await fixtureModel(root.dir, name, { ...preset, dtype: 'F32', seed: 5 });
      const p = await pipeline(fixture, [{ start: 0, end: fixture.checkpoint.config.numLayers }]);
      const sequences: number[][] = [];
      for (let seed = 1; seed <= 4; seed++) sequences.push(await sampleSequence(p, seed, 100));
      await p.dispose();
      for (const format of ['q4', 'q8'] as const) {
        const rate = agreement(await forced(fixture, sequences, weightSpec('fp32', { format, accuracyLevel: 0 })), await forced(fixture, sequences, weightSpec('fp32', { format, accuracyLevel: 4 })));
        lines.push(`${name} ${format}: ${(100 * rate).toFixed(2)}%`);
        // 0.95: level 4's int8 kernels differ by CPU (llamaUntied q8 agreed 96.0% on one machine, more on CI's)
        expect(rate, `${name} ${format}`).toBeGreaterThanOrEqual(0.95);
      }
    }
    console.log(`fixtures, level 4 vs level 0 top-1:\n${lines.join('\n')}`);
  });
});
