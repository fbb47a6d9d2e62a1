/**
 * The head's sampler worker (src/node/sampler-worker.ts, a real worker thread) draws exactly
 * the tokens a Sampler on this thread draws: same seeds, same logits → same tokens, logprobs
 * and verify decisions, with penalties, masks, top-k / top-p / min-p and logprobs; the calls
 * made in one turn travel as one message; the Sampler's errors arrive as the same types.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ConstraintDeadEndError, createRng, Sampler, validateSamplingParams, type SamplingParams, type TokenMask } from '../../src/core/sampling/index.ts';
import { SamplerWorker } from '../../src/node/sampler-worker.ts';

const VOCAB = 151_936; // Qwen2.5's vocabulary: the size the worker exists for
const pool = new SamplerWorker();
afterAll(() => pool.close());

function randomLogits(seed: number, scale = 6): Float32Array {
  const rng = createRng(seed);
  return Float32Array.from({ length: VOCAB }, () => (rng.next() - 0.5) * 2 * scale);
}

/** Every third token allowed, and ids 5…9 always. */
function stripedMask(): TokenMask {
  const mask = new Int32Array(Math.ceil(VOCAB / 32));
  for (let id = 0; id < VOCAB; id++) if (id % 3 === 0 || (id >= 5 && id < 10)) mask[id >> 5] |= 1 << (id & 31);
  return mask;
}

const CASES: readonly (readonly [string, Partial<SamplingParams>])[] = [
  ['temperature 0.8', { temperature: 0.8, seed: 11 }],
  ['top-k 40, top-p 0.9', { temperature: 1.1, topK: 40, topP: 0.9, seed: 12 }],
  ['top-p 0.5, min-p 0.05', { temperature: 0.7, topP: 0.5, minP: 0.05, seed: 13 }],
  ['penalties and logprobs', { temperature: 0.9, repetitionPenalty: 1.3, presencePenalty: 0.4, frequencyPenalty: 0.2, logprobs: true, topLogprobs: 5, seed: 14 }],
  ['greedy with logprobs', { temperature: 0, logprobs: true, topLogprobs: 3 }],
];

describe('SamplerWorker', () => {
  for (const [name, params] of CASES) {
    it(`draws what a Sampler on this thread draws: ${name}, masked every other step, drafts verified`, async () => {
      const valid = validateSamplingParams(params);
      const here = new Sampler(valid, VOCAB);
      const there = pool.factory(valid, VOCAB);
      const prompt = [3, 17, 17, 4000, 151_000];
      const generated: number[] = [];
      const mask = stripedMask();
      for (let step = 0; step < 24; step++) {
        const logits = randomLogits(1000 + step);
        const history = { prompt, generated: [...generated] };
        const m = step % 2 === 1 ? mask : undefined;
        const draft = step % 3 === 2 ? { tokenId: generated.at(-1) ?? 7 } : undefined;
        const want = draft ? here.verify(logits, history, draft, m) : { ...here.sample(logits, history, m), accepted: false };
        const got = draft ? await there.verify(logits, history, draft, m) : { ...(await there.sample(logits, history, m)), accepted: false };
        expect(got).toEqual(want);
        generated.push(want.tokenId);
      }
      there.dispose();
    });
  }

  it('sends the calls of one turn as one message, and answers each its own', async () => {
    const before = pool.stats;
    const samplers = Array.from({ length: 8 }, (_, i) => ({ here: new Sampler(validateSamplingParams({ temperature: 1, seed: i }), VOCAB), there: pool.factory(validateSamplingParams({ temperature: 1, seed: i }), VOCAB) }));
    const logits = samplers.map((_, i) => randomLogits(50 + i));
    const none = { prompt: [], generated: [] };
    const got = await Promise.all(samplers.map((s, i) => s.there.sample(logits[i], none)));
    expect(got.map((t) => t.tokenId)).toEqual(samplers.map((s, i) => s.here.sample(logits[i], none).tokenId));
    expect(pool.stats.batches - before.batches).toBe(1);
    expect(pool.stats.jobs - before.jobs).toBe(8);
    for (const s of samplers) s.there.dispose();
  });

  it('leaves the caller its logits and mask', async () => {
    const logits = randomLogits(7);
    const copy = logits.slice();
    const mask = stripedMask();
    const there = pool.factory(validateSamplingParams({ temperature: 0.5, seed: 1 }), VOCAB);
    await there.sample(logits, { prompt: [], generated: [] }, mask);
    expect(logits).toEqual(copy);
    expect(mask).toEqual(stripedMask());
    there.dispose();
  });

  it("rebuilds the Sampler's errors: a dead-end mask, a NaN logit, a wrong length; a disposed sampler refuses", async () => {
    const there = pool.factory(validateSamplingParams({ temperature: 0.5, seed: 2 }), VOCAB);
    const none = { prompt: [], generated: [] };
    await expect(there.sample(randomLogits(1), none, new Int32Array(Math.ceil(VOCAB / 32)))).rejects.toBeInstanceOf(ConstraintDeadEndError);
    const nan = randomLogits(2);
    nan[77] = Number.NaN;
    await expect(there.sample(nan, none)).rejects.toThrow(new RangeError('logit 77 is NaN'));
    await expect(Promise.resolve().then(() => there.sample(new Float32Array(10), none))).rejects.toBeInstanceOf(RangeError);
    // The sequence goes on after a refused call, as a local Sampler's does.
    const ok = await there.sample(randomLogits(3), none);
    expect(ok.tokenId).toBe(new Sampler(validateSamplingParams({ temperature: 0.5, seed: 2 }), VOCAB).sample(randomLogits(3), none).tokenId);
    there.dispose();
    await expect(Promise.resolve().then(() => there.sample(randomLogits(3), none))).rejects.toThrow('disposed');
    expect(() => pool.factory({ ...validateSamplingParams({}), temperature: -1 }, VOCAB)).toThrow();
  });
});
