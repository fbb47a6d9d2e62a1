/**
 * Teacher forcing for quality checks: feed a fixed token sequence one position at a time and
 * keep every position's logits; perplexity of the sequence; top-1 agreement of two runs.
 */
import { randomUUID } from 'node:crypto';
import { generateLocal } from '../../src/core/route/local-pipeline.ts';
import { validateSamplingParams } from '../../src/core/sampling/index.ts';
import type { LoadedPipeline } from '../../src/node/local-model.ts';
import { argmax, stepLogits } from '../engine/harness.ts';

/** Logits after each position of `ids` (the prediction of ids[i + 1] is entry i). */
export async function forcedLogits(p: LoadedPipeline, ids: readonly number[]): Promise<Float32Array[]> {
  const session = randomUUID();
  const out: Float32Array[] = [];
  for (let i = 0; i < ids.length; i++) out.push(await stepLogits(p, session, [ids[i]], i));
  for (const stage of p.stages) stage.kv.release(session);
  return out;
}

/** Natural-log likelihood terms of ids[1..] under `logits`. */
export function negativeLogLikelihoods(logits: readonly Float32Array[], ids: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i + 1 < ids.length; i++) {
    const row = logits[i];
    let max = -Infinity;
    for (const v of row) max = Math.max(max, v);
    let sum = 0;
    for (const v of row) sum += Math.exp(v - max);
    out.push(Math.log(sum) + max - row[ids[i + 1]]);
  }
  return out;
}

export const perplexity = (nll: readonly number[]) => Math.exp(nll.reduce((a, b) => a + b, 0) / nll.length);

/** Positions where both runs pick the same top-1 token, and how many positions there were. */
export function topOneAgreement(a: readonly Float32Array[], b: readonly Float32Array[]): { same: number; total: number } {
  let same = 0;
  for (let i = 0; i < a.length; i++) if (argmax(a[i]) === argmax(b[i])) same++;
  return { same, total: a.length };
}

/** Text the pipeline samples (temperature 1, seeded) from `<s>`, up to `maxTokens`; the sequence includes the prompt. */
export async function sampleSequence(p: LoadedPipeline, seed: number, maxTokens: number, bos = 1): Promise<number[]> {
  const ids = [bos];
  const params = validateSamplingParams({ temperature: 1, seed, maxTokens });
  for await (const token of generateLocal(p, ids.slice(), params, randomUUID())) ids.push(token.tokenId);
  return ids;
}
