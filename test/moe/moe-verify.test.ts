/**
 * --verify on MoE layers: the verifier compares a hop's decode answer with a witness's replay
 * of the whole history as one prefill (route/verify-hop.ts). A near-tie in a router can choose
 * different experts in the two runs (a routing flip), which moves that token's output by a
 * whole expert's share — far beyond the float tolerance. Measured here on real graphs, every
 * decode step checked as the verifier would: the honest replay must agree within the
 * tolerance `toleranceFor` gives that runtime and format (fp32, and q4 at accuracy level 4,
 * which rounds activations to int8 and so makes flips likeliest).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';
import { activationDifference, toleranceFor } from '../../src/core/route/verify-hop.ts';
import { lastPositions } from '../../src/core/route/activations-slice.ts';
import type { Activations } from '../../src/core/runtime/shard-executor.ts';
import { tinyMoeCheckpoint } from '../fixtures/moe-checkpoints.ts';
import { fixtureModel, pipeline, tempDir } from '../engine/harness.ts';

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('moe-verify');
  process.env.MESHNET_HOME = root.dir + '/home';
});
afterAll(() => root.remove());

describe('verification of MoE hops', () => {
  for (const [name, spec] of [
    ['fp32', undefined],
    ['q4 accuracy level 4', weightSpec('fp32', { format: 'q4', blockSize: 32, accuracyLevel: 4 })],
  ] as const) {
    it(`${name}: every decode step's answer agrees with its prefill replay within the tolerance`, async () => {
      const model = await fixtureModel(root.dir, `verify-${name.replace(/\W+/g, '-')}`, tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'F32', seed: 95, numExperts: 16, topK: 4 }));
      const p = await pipeline(model, [{ start: 0, end: 4 }], 'cpu', 'fp32', spec);
      try {
        const { executor, kv } = p.stages[0];
        const tokens = Array.from({ length: 24 }, (_, i) => 1 + ((i * 37 + 11) % 120));
        const inputs: Activations[] = [];
        const differences: number[] = [];
        for (const [i, id] of tokens.entries()) {
          const hidden = await p.head.embed([id]);
          inputs.push(hidden);
          const answer = await executor.run({ sessionId: 'hop', startPosition: i, hidden }, kv.acquire('hop', executor.range));
          const H = hidden.hiddenSize;
          const history = new Float32Array(inputs.length * H);
          inputs.forEach((a, j) => history.set(a.data as Float32Array, j * H));
          const replayed = await executor.run({ sessionId: `witness-${i}`, startPosition: 0, hidden: { ...hidden, tokens: inputs.length, data: history } }, kv.acquire(`witness-${i}`, executor.range));
          kv.release(`witness-${i}`);
          differences.push(activationDifference(answer, lastPositions(replayed, 1)));
        }
        const tolerance = toleranceFor(['cpu', 'cpu'], 'fp32', spec ? [spec, spec] : []);
        console.log(`MoE verify (${name}): largest decode-vs-replay difference ${Math.max(...differences).toExponential(2)} (tolerance ${tolerance})`);
        expect(Math.max(...differences)).toBeLessThanOrEqual(tolerance);
      } finally {
        await p.dispose();
      }
    });
  }
});
