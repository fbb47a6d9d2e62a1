/**
 * The head's embedding and LM head in a worker thread (src/node/head-worker.ts, real
 * onnxruntime sessions in a real worker) give what the same sessions give on this thread:
 * the same embeddings and logits, bit for bit (single rows, a speculative step's several
 * rows, batched blocks), so the same tokens and logprobs; their errors arrive as the same types.
 * Rows picked beside the LM head (its samplers, `startBlocks`) give the tokens and logprobs a
 * Sampler on this thread gives over this thread's logits, for every kind of sampling.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asWeightSpec } from '../../src/core/model/quant/weight-format.ts';
import { BatchingHeadRunner } from '../../src/core/runtime/batching-head.ts';
import { loadHeadRunner } from '../../src/core/runtime/ort-loader.ts';
import type { HeadRunner } from '../../src/core/runtime/ort-head-runner.ts';
import { pickRows, pickToken, sampleChain } from '../../src/core/runtime/head-pick.ts';
import { ConstraintDeadEndError, localSampler, Sampler, validateSamplingParams, type SamplingParams, type TokenMask } from '../../src/core/sampling/index.ts';
import { getShardArtifact } from '../../src/node/artifact-cache.ts';
import { WorkerHeadRunner } from '../../src/node/head-worker.ts';
import { openLocalModel } from '../../src/node/local-model.ts';
import { nodeLoaderOptions } from '../../src/node/ort-node-runtime.ts';
import { QWEN_CHAT_VOCAB, writeQwenChatModel } from '../fixtures/qwen-chat-model.ts';

/** The bytes of a float array (deep equality over 151,936 floats is slow; bytes are exact). */
const bits = (a: Float32Array | Uint16Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('base64');

let here: HeadRunner;
let there: WorkerHeadRunner;
/** Samples its picks in the head worker itself (no sampler thread). */
let alone: WorkerHeadRunner;
let remove: () => Promise<void>;

beforeAll(async () => {
  const written = await writeQwenChatModel();
  remove = written.remove;
  const model = await openLocalModel(written.dir);
  const weights = asWeightSpec(model.checkpoint.config, 'fp32', undefined);
  const loader = await nodeLoaderOptions({ device: 'cpu', dtype: 'fp32', threads: 1 });
  const e = await getShardArtifact(model.checkpoint, model.key, { kind: 'embedding' }, 'fp32', weights);
  const h = await getShardArtifact(model.checkpoint, model.key, { kind: 'head' }, 'fp32', weights);
  here = await loadHeadRunner(model.checkpoint.config, e.artifact, h.artifact, model.checkpoint.source, loader);
  there = await WorkerHeadRunner.start({ modelDir: written.dir, device: 'cpu', dtype: 'fp32', weights, threads: 1 });
  alone = await WorkerHeadRunner.start({ modelDir: written.dir, device: 'cpu', dtype: 'fp32', weights, threads: 1 }, { samplerThread: false });
}, 120_000);
afterAll(async () => {
  await here?.dispose();
  await there?.dispose();
  await alone?.dispose();
  await remove?.();
});

describe('WorkerHeadRunner', () => {
  it('embeds and computes logits exactly as on this thread (one row, several rows, batched blocks)', async () => {
    expect(there.device).toBe(here.device);
    const ids = [3, 17, 4000, 151_000, 9];
    const a = await here.embed(ids);
    const b = await there.embed(ids);
    expect(b.tokens).toBe(a.tokens);
    expect(bits(b.data)).toBe(bits(a.data));
    expect(bits(await there.logits(b))).toBe(bits(await here.logits(a)));
    expect(bits(await there.logits(b, [0, 2, 4]))).toBe(bits(await here.logits(a, [0, 2, 4])));
    const other = await here.embed([42, 43]);
    const want = await here.logitsBatch!([a, other], [[1, 3], undefined]);
    const got = await there.logitsBatch([b, other], [[1, 3], undefined]);
    expect(got.map((r) => r.length)).toEqual([2 * QWEN_CHAT_VOCAB, QWEN_CHAT_VOCAB]);
    expect(got.map(bits)).toEqual(want.map(bits));
  });

  it('gives the same tokens and logprobs over a decode loop, folded by BatchingHeadRunner', async () => {
    const batched = new BatchingHeadRunner(there);
    const params = validateSamplingParams({ temperature: 0.9, topP: 0.95, logprobs: true, topLogprobs: 4, seed: 5 });
    for (const runner of [there, batched]) {
      const mine = new Sampler(params, QWEN_CHAT_VOCAB);
      const theirs = new Sampler(params, QWEN_CHAT_VOCAB);
      const prompt = [3, 17, 4000];
      const generatedA: number[] = [];
      const generatedB: number[] = [];
      let lastA = prompt.at(-1)!;
      let lastB = lastA;
      for (let step = 0; step < 12; step++) {
        // Three sessions' steps in one turn (the batch), this sequence's row first.
        const hiddens = await Promise.all([lastB, 1, 2].map((id) => runner.embed([id])));
        const [rowB] = await Promise.all(hiddens.map((h) => runner.logits(h)));
        const rowA = await here.logits(await here.embed([lastA]));
        const want = mine.sample(rowA, { prompt, generated: generatedA });
        const got = theirs.sample(rowB, { prompt, generated: generatedB });
        expect(got).toEqual(want);
        generatedA.push((lastA = want.tokenId));
        generatedB.push((lastB = got.tokenId));
      }
    }
    expect(batched.stats.batchedRows).toBeGreaterThan(0);
  });

  it('refuses what the in-thread runner refuses, with the same error types, and keeps serving', async () => {
    await expect(there.embed([QWEN_CHAT_VOCAB])).rejects.toBeInstanceOf(RangeError);
    const hidden = await there.embed([1, 2]);
    await expect(there.logits(hidden, [2])).rejects.toThrow(RangeError);
    await expect(there.logits({ ...hidden, tokens: 3 })).rejects.toThrow(/activation data holds/);
    expect((await there.logits(hidden)).length).toBe(QWEN_CHAT_VOCAB);
  });

});

describe.each([
  ['in the sampler worker', () => there],
  ['in the head worker', () => alone],
])('WorkerHeadRunner picks rows %s', (_, runner) => {
  it('samples picked rows beside the LM head as a Sampler here does (greedy, seeded with logprobs, masked, penalized), beside unpicked and foreign blocks', async () => {
    const batched = new BatchingHeadRunner(runner());
    const kinds: Partial<SamplingParams>[] = [
      { temperature: 0 },
      { temperature: 0.8, seed: 11, logprobs: true, topLogprobs: 5 },
      { temperature: 0.7, topK: 40, seed: 3, repetitionPenalty: 1.3, presencePenalty: 0.4 },
      { temperature: 0, logprobs: true, topLogprobs: 2 },
    ];
    const params = kinds.map((k) => validateSamplingParams(k));
    const reference = params.map((p) => new Sampler(p, QWEN_CHAT_VOCAB));
    const remote = params.map((p) => runner().samplers(p, QWEN_CHAT_VOCAB));
    const foreign = localSampler(params[1], QWEN_CHAT_VOCAB);
    const foreignRef = new Sampler(params[1], QWEN_CHAT_VOCAB);
    const prompt = [3, 17, 4000];
    const generated: number[][] = params.map(() => []);
    const last = params.map((_, i) => 100 + i);
    // Every other step, sequence 2 is masked to the even token ids below 5,000.
    const evens = new Int32Array(Math.ceil(QWEN_CHAT_VOCAB / 32));
    for (let id = 0; id < 5000; id += 2) evens[id >>> 5] |= 1 << (id & 31);
    let picksMatched = 0;
    for (let step = 0; step < 6; step++) {
      const hiddens = await Promise.all(last.map((id) => here.embed([id])));
      const mask = (i: number): TokenMask | undefined => (i === 2 && step % 2 === 0 ? evens : undefined);
      const extra = await here.embed([7, 8]);
      // One turn: four picks (the batcher folds them into one worker run), an unpicked block and a foreign pick.
      const [got, rows, foreignGot] = await Promise.all([
        Promise.all(hiddens.map((h, i) => pickToken(batched, h, 0, { sampler: remote[i], history: { prompt, generated: generated[i] }, mask: mask(i) }))),
        batched.logits(extra, [0, 1]),
        pickToken(batched, extra, 1, { sampler: foreign, history: { prompt, generated: [] } }),
      ]);
      expect(bits(rows)).toBe(bits(await here.logits(extra, [0, 1])));
      expect(foreignGot).toEqual(foreignRef.sample(await here.logits(extra, [1]), { prompt, generated: [] }));
      for (let i = 0; i < params.length; i++) {
        const want = reference[i].sample(await here.logits(hiddens[i]), { prompt, generated: generated[i] }, mask(i));
        expect({ ...got[i], step, i }).toEqual({ ...want, step, i });
        if (mask(i)) expect(want.tokenId % 2 === 0 && want.tokenId < 5000).toBe(true);
        generated[i].push((last[i] = want.tokenId));
        picksMatched++;
      }
      // A row already here (a speculative step's) goes to the same worker Sampler: its RNG stays in step.
      const row = await here.logits(hiddens[1]);
      expect(await remote[1].sample(row, { prompt, generated: generated[1] })).toEqual(reference[1].sample(row, { prompt, generated: generated[1] }));
    }
    expect(picksMatched).toBe(24);
    expect(batched.stats.batchedRows).toBeGreaterThan(0);
    // A pick with a mask that allows nothing fails alone, as the type a local Sampler throws; its neighbours are answered.
    const h = await here.embed([5]);
    const dead = pickToken(batched, h, 0, { sampler: remote[3], history: { prompt, generated: [] }, mask: new Int32Array(evens.length) });
    const alive = pickToken(batched, h, 0, { sampler: remote[0], history: { prompt, generated: [] } });
    await expect(dead).rejects.toBeInstanceOf(ConstraintDeadEndError);
    expect((await alive).tokenId).toBe(reference[0].sample(await here.logits(h), { prompt, generated: [] }).tokenId);
    // A disposed sampler's state is gone from the worker, and it refuses further picks.
    remote[1].dispose();
    await expect(pickToken(batched, h, 0, { sampler: remote[1], history: { prompt, generated: [] } })).rejects.toThrow(/disposed/);
    for (const r of remote) r.dispose();
  });

  it('verifies a speculative step\'s drafts beside the LM head as the same calls on a Sampler here, stopping at the first replaced draft', async () => {
    const batched = new BatchingHeadRunner(runner());
    const prompt = [3, 17, 4000];
    const hidden = await here.embed([11, 12, 13, 14]);
    const logits = await here.logits(hidden, [0, 1, 2, 3]);
    const row = (i: number) => logits.subarray(i * QWEN_CHAT_VOCAB, (i + 1) * QWEN_CHAT_VOCAB);
    const greedy = (i: number) => new Sampler(validateSamplingParams({ temperature: 0 }), QWEN_CHAT_VOCAB).sample(row(i), { prompt, generated: [] }).tokenId;
    // Drafts equal to each row's argmax are kept by a greedy sampler; a wrong one stops the chain.
    const kinds: [Partial<SamplingParams>, number[]][] = [
      [{ temperature: 0 }, [greedy(0), greedy(1), greedy(2)]],
      [{ temperature: 0 }, [greedy(0), (greedy(1) + 1) % QWEN_CHAT_VOCAB, greedy(2)]],
      [{ temperature: 0.8, seed: 21, logprobs: true, topLogprobs: 3, frequencyPenalty: 0.5 }, [greedy(0), greedy(1), greedy(2)]],
    ];
    const lengths: number[] = [];
    for (const [kind, ids] of kinds) {
      const params = validateSamplingParams(kind);
      const drafts = ids.map((tokenId) => ({ tokenId }));
      const want = await sampleChain(new Sampler(params, QWEN_CHAT_VOCAB), row, { history: { prompt, generated: [5] }, drafts });
      const got = await pickRows(batched, hidden, 0, { sampler: runner().samplers(params, QWEN_CHAT_VOCAB), history: { prompt, generated: [5] }, drafts });
      expect(got).toEqual(want);
      lengths.push(got.length);
    }
    // Greedy keeps its argmax drafts (3 kept + the bonus row) and stops at the wrong one (kept, replaced).
    expect(lengths.slice(0, 2)).toEqual([4, 2]);
    await expect(pickRows(batched, hidden, 0, { sampler: runner().samplers(validateSamplingParams({}), QWEN_CHAT_VOCAB), history: { prompt, generated: [] }, drafts: [{ tokenId: 1 }], mask: new Int32Array(4748) })).rejects.toBeInstanceOf(RangeError);
  });
});
