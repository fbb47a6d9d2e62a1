/**
 * The pure parts of speculation: prompt lookup, the adaptive draft length, and how the
 * answer trims drafts (budget, stop tokens, stop strings, the grammar of a constraint).
 */
import { describe, expect, it } from 'vitest';
import { TokenOutput } from '../../src/core/route/token-output.ts';
import { validateSamplingParams, type TokenConstraint, type TokenMask } from '../../src/core/sampling/index.ts';
import { DraftLength } from '../../src/core/speculation/draft-length.ts';
import { lookupDraft, NgramDrafter } from '../../src/core/speculation/ngram-drafter.ts';
import type { TextTokenizer } from '../../src/core/model/tokenizer.ts';

describe('prompt lookup', () => {
  it('copies what followed the most recent earlier occurrence of the longest matching suffix', () => {
    //           0  1  2  3  4  5  6  7  8
    const text = [5, 6, 7, 8, 1, 6, 7, 9, 6, 7];
    // Suffix [9, 6, 7]: no earlier match; [6, 7]: most recent earlier at 5 → continues 9, 6, 7, 9 (copying its own draft).
    expect(lookupDraft(text, 4)).toEqual([9, 6, 7, 9]);
    expect(lookupDraft(text, 4, 1, 1)).toEqual([9, 6, 7, 9]); // [7] last seen at 6, followed by 9
    expect(lookupDraft([1, 2, 3, 1, 2, 3, 1, 2], 5)).toEqual([3, 1, 2, 3, 1]); // the longest match, [3, 1, 2]
  });

  it('drafts a repetition all the way to k', () => {
    expect(lookupDraft([4, 431, 431], 6)).toEqual([431, 431, 431, 431, 431, 431]);
  });

  it('has no guess for a context without repeats, a single token, or k = 0', async () => {
    expect(lookupDraft([1, 2, 3, 4], 3)).toEqual([]);
    expect(lookupDraft([1], 3)).toEqual([]);
    expect(lookupDraft([1, 1], 0)).toEqual([]);
    expect(await new NgramDrafter({ minNgram: 2 }).draft([5, 1, 5], 2)).toEqual([]);
    expect(() => new NgramDrafter({ minNgram: 3, maxNgram: 2 })).toThrow(RangeError);
  });
});

describe('the adaptive draft length', () => {
  it('grows while drafts are kept, up to maxK', () => {
    const length = new DraftLength({ maxK: 8 });
    const start = length.next();
    expect(start).toBeGreaterThan(0);
    for (let i = 0; i < 10; i++) length.record(length.next(), length.best);
    expect(length.next()).toBe(8);
    expect(length.acceptance).toBeGreaterThan(0.9);
  });

  it('falls to none when drafts keep failing, then probes with one draft every probeEvery steps', () => {
    const length = new DraftLength({ probeEvery: 4 });
    for (let i = 0; i < 12; i++) length.record(1, 0);
    expect(length.best).toBe(0);
    const schedule = Array.from({ length: 8 }, () => length.next());
    expect(schedule).toEqual([0, 0, 0, 1, 0, 0, 0, 1]);
  });

  it('comes back once drafts are kept again', () => {
    const length = new DraftLength();
    for (let i = 0; i < 12; i++) length.record(1, 0);
    expect(length.best).toBe(0);
    for (let i = 0; i < 10; i++) length.record(1, 1);
    expect(length.best).toBeGreaterThan(1);
  });

  it('the cost of a draft decides where it stops paying', () => {
    const cheap = new DraftLength({ costPerDraft: 0.01 });
    const dear = new DraftLength({ costPerDraft: 0.5 });
    expect(cheap.best).toBeGreaterThan(dear.best); // both at the prior α = 0.5
    expect(dear.best).toBe(0); // E(1) / (1 + 0.5) = 1.5 / 1.5: no gain
    expect(() => new DraftLength({ costPerDraft: 0 })).toThrow(RangeError);
    expect(() => cheap.record(1, 2)).toThrow(RangeError);
  });
});

/** A tokenizer over ids as letters: id i decodes to String.fromCharCode(97 + i). */
const letters: TextTokenizer = {
  encode: (text) => [...text].map((c) => c.charCodeAt(0) - 97),
  decode: (ids) => ids.map((id) => String.fromCharCode(97 + id)).join(''),
  specialTokens: { ids: new Map(), additional: [], eosIds: [] },
  chatTemplate: { text: '', isFallback: false, render: () => '' },
  vocabulary: () => {
    throw new Error('no grammar vocabulary in this test');
  },
};

describe('drafts fitted to the answer', () => {
  const drafts = (ids: number[]) => ids.map((tokenId) => ({ tokenId }));
  const output = (extra: { maxTokens?: number; stopTokenIds?: number[] } = {}, stopStrings?: string[]) =>
    new TokenOutput(validateSamplingParams({ temperature: 0, maxTokens: 10, ...extra }), 26, [0], letters, stopStrings);

  it('no more than the budget leaves, less the step’s own token', async () => {
    expect(await output({ maxTokens: 4 }).fitDraft(drafts([1, 2, 3, 4, 5]))).toHaveLength(3);
    expect(await output({ maxTokens: 1 }).fitDraft(drafts([1, 2]))).toEqual([]);
  });

  it('ends at a stop token, and at the token that completes a stop string', async () => {
    expect((await output({ stopTokenIds: [3] }).fitDraft(drafts([1, 2, 3, 4, 5]))).map((d) => d.tokenId)).toEqual([1, 2, 3]);
    // 'c' 'd' 'e' spell "cde": the stop string "de" is complete at 'e'.
    expect((await output({}, ['de']).fitDraft(drafts([2, 3, 4, 5, 6]))).map((d) => d.tokenId)).toEqual([2, 3, 4]);
    expect(await output({}, ['zz']).fitDraft(drafts([2, 3, 4]))).toHaveLength(3);
  });
});

/**
 * A seam double of a grammar: after token t only t + 1 and t + 2 may follow (ids mod 26), and
 * it counts the masks it was asked for. Plain data, so the state after a walk can be compared.
 */
class StairConstraint implements TokenConstraint {
  readonly accepted: number[] = [];
  masks = 0;
  private last: number;
  constructor(private readonly start: number) {
    this.last = start;
  }
  async nextMask(): Promise<TokenMask> {
    this.masks++;
    const mask = new Int32Array(1);
    for (const id of this.allowed()) mask[0] |= 1 << id;
    return mask;
  }
  accept(tokenId: number): void {
    if (!this.allowed().includes(tokenId)) throw new Error(`token ${tokenId} is not allowed after ${this.last}`);
    this.accepted.push(tokenId);
    this.last = tokenId;
  }
  rollback(tokens: number): void {
    this.accepted.length -= tokens;
    this.last = this.accepted.at(-1) ?? this.start;
  }
  async fork(): Promise<TokenConstraint> {
    throw new Error('not used');
  }
  readonly finished = false;
  dispose(): void {}
  private allowed(): number[] {
    return [(this.last + 1) % 26, (this.last + 2) % 26];
  }
}

describe('drafts fitted to a grammar', () => {
  const greedy = validateSamplingParams({ temperature: 0, maxTokens: 10 });
  /** Logits that favour `id` (the model's greedy choice). */
  const favour = (id: number) => Float32Array.from({ length: 26 }, (_, i) => (i === id ? 5 : 0));

  it('cuts before the first draft the grammar forbids and leaves the constraint where it was', async () => {
    const constraint = new StairConstraint(0);
    const output = new TokenOutput(greedy, 26, [0], letters, undefined, constraint);
    // 1, 3 are allowed (0 → 1 → 3), 4 is allowed after 3, 7 is not.
    const fitted = await output.fitDraft([1, 3, 4, 7, 8].map((tokenId) => ({ tokenId })));
    expect(fitted.map((d) => d.tokenId)).toEqual([1, 3, 4]);
    expect(constraint.accepted).toEqual([]);
    expect(await output.fitDraft([{ tokenId: 5 }])).toEqual([]); // forbidden at once
  });

  it('the step’s verification reuses the walk’s masks while drafts are kept, and asks afresh after a replacement', async () => {
    const constraint = new StairConstraint(0);
    const output = new TokenOutput(greedy, 26, [0], letters, undefined, constraint);
    const fitted = await output.fitDraft([1, 3, 4].map((tokenId) => ({ tokenId })));
    expect(constraint.masks).toBe(3);
    // The model agrees with 1 and 3, prefers 5 to 4 (allowed after 3): 4 is replaced by 5.
    expect(await output.next(favour(1), fitted[0])).toMatchObject({ accepted: true });
    expect(await output.next(favour(3), fitted[1])).toMatchObject({ accepted: true });
    expect(constraint.masks).toBe(3); // no new mask for the kept drafts
    expect(await output.next(favour(5), fitted[2])).toMatchObject({ accepted: false });
    expect(output.generated).toEqual([1, 3, 5]);
    expect(constraint.accepted).toEqual([1, 3, 5]);
    // The model's favourite is forbidden after 5 (allowed: 6, 7): the mask wins, with a fresh mask.
    const free = await output.next(favour(9));
    expect([6, 7]).toContain(free.token?.tokenId);
    expect(constraint.masks).toBe(4);
  });
});
