/** Drives a constraint the way random weights would: a seeded uniform pick among allowed tokens. */
import { createRng, maskAllows, type TokenConstraint } from '../../src/core/sampling/index.ts';

export async function randomWalk(constraint: TokenConstraint, vocabSize: number, seed: number, maxSteps = 2000): Promise<number[]> {
  const rng = createRng(seed);
  const ids: number[] = [];
  const allowed = new Int32Array(vocabSize);
  while (!constraint.finished && ids.length < maxSteps) {
    const mask = await constraint.nextMask();
    let n = 0;
    for (let i = 0; i < vocabSize; i++) if (!mask || maskAllows(mask, i)) allowed[n++] = i;
    const id = allowed[Math.floor(rng.next() * n)];
    constraint.accept(id);
    ids.push(id);
  }
  return ids;
}
