/**
 * The model's natural end (generation_config.json's `meshnet_natural_end`): parsed and
 * validated, resolved to token ids, and applied by TokenOutput — the answer ends (`stop`, the
 * token kept in the text) at the first such token once it holds `min_new_tokens` tokens; drafts
 * are fitted to it the same way.
 */
import { describe, expect, it } from 'vitest';
import { parseModelConfig } from '../../src/core/model/config.ts';
import { naturalEndTokens } from '../../src/core/model/generation-limits.ts';
import type { TextTokenizer } from '../../src/core/model/tokenizer.ts';
import { TokenOutput } from '../../src/core/route/token-output.ts';
import { validateSamplingParams, type TokenConstraint, type TokenMask } from '../../src/core/sampling/index.ts';

/** A grammar seam for one test: the stop token (id 1) is allowed only while `open` is false (e.g. outside a call). */
class GateConstraint implements TokenConstraint {
  open = false;
  masks = 0;
  readonly finished = false;
  async nextMask(): Promise<TokenMask> {
    this.masks++;
    return Int32Array.of(this.open ? ~0b10 : ~0); // every id of 0–27; id 1 (stop) only when closed
  }
  accept(tokenId: number): void {
    if (tokenId === 27) this.open = true; // 'x.' opens a "call"
  }
  rollback(): void {}
  async fork(): Promise<TokenConstraint> {
    throw new Error('not used');
  }
  dispose(): void {}
}

/** Ids 0–25 are 'a'–'z'; id 26 is '.', id 27 'x.' */
const pieces = [...'abcdefghijklmnopqrstuvwxyz', '.', 'x.'];
const tokenizer = { decode: (ids: readonly number[]) => ids.map((id) => pieces[id]).join('') } as unknown as TextTokenizer;
const favour = (id: number) => {
  const logits = new Float32Array(pieces.length);
  logits[id] = 10;
  return logits;
};

const llama = {
  architectures: ['LlamaForCausalLM'],
  hidden_size: 64,
  intermediate_size: 128,
  num_hidden_layers: 2,
  num_attention_heads: 8,
  num_key_value_heads: 4,
  vocab_size: 28,
  max_position_embeddings: 128,
  rms_norm_eps: 1e-5,
};

describe('meshnet_natural_end', () => {
  it('is parsed from generation_config.json and validated', () => {
    expect(parseModelConfig('config.json', llama, { meshnet_natural_end: { min_new_tokens: 3, ends_with: ['.'] } }).naturalEnd).toEqual({ minNewTokens: 3, endsWith: ['.'] });
    expect(parseModelConfig('config.json', llama, {}).naturalEnd).toBeUndefined();
    expect(() => parseModelConfig('config.json', llama, { meshnet_natural_end: { min_new_tokens: 0, ends_with: ['.'] } })).toThrow(/meshnet_natural_end.min_new_tokens' must be a positive integer/);
    expect(() => parseModelConfig('config.json', llama, { meshnet_natural_end: { min_new_tokens: 2, ends_with: [] } })).toThrow(/meshnet_natural_end.ends_with' must be a non-empty array/);
    expect(() => parseModelConfig('config.json', llama, { meshnet_natural_end: { min_new_tokens: 2, ends_with: [''] } })).toThrow(/ends_with/);
  });

  it('resolves to every token whose text ends with one of the strings', () => {
    expect(naturalEndTokens({ naturalEnd: { minNewTokens: 3, endsWith: ['.'] } }, pieces.length, (id) => pieces[id])).toEqual({ minTokens: 3, tokenIds: [26, 27] });
    expect(naturalEndTokens({}, pieces.length, (id) => pieces[id])).toBeUndefined();
    expect(naturalEndTokens({ naturalEnd: { minNewTokens: 3, endsWith: ['!'] } }, pieces.length, (id) => pieces[id])).toBeUndefined();
  });

  const output = (naturalEnd?: { minTokens: number; tokenIds: number[] }) =>
    new TokenOutput(validateSamplingParams({ temperature: 0, maxTokens: 10, stopTokenIds: [] }), pieces.length, [0], tokenizer, undefined, undefined, naturalEnd);

  it('ends the answer at the first end token once it is long enough, keeping that token', async () => {
    const end = { minTokens: 3, tokenIds: [26, 27] };
    const out = output(end);
    const seen: string[] = [];
    let done;
    for (const id of [0, 26, 1, 2, 27, 3]) {
      const step = await out.next(favour(id));
      seen.push(step.token?.text ?? '');
      if (step.done) {
        done = step.done;
        break;
      }
    }
    // '.' at the 2nd token is too early; 'x.' at the 5th ends it.
    expect(seen.join('')).toBe('a.bcx.');
    expect(done).toMatchObject({ finishReason: 'stop', usage: { completionTokens: 5 } });
    // Without a natural end the same tokens run to the budget.
    const plain = output();
    for (const id of [0, 26, 1, 2, 27]) expect((await plain.next(favour(id))).done).toBeUndefined();
  });

  it('drafts are fitted to it: none verified past the token that ends the answer', async () => {
    const out = output({ minTokens: 3, tokenIds: [26] });
    expect((await out.fitDraft([0, 26, 1, 26, 2].map((tokenId) => ({ tokenId })))).map((d) => d.tokenId)).toEqual([0, 26, 1, 26]);
  });

  it('under a grammar, only where the grammar lets the answer end (a stop token allowed next)', async () => {
    const constraint = new GateConstraint();
    const out = new TokenOutput(validateSamplingParams({ temperature: 0, maxTokens: 10, stopTokenIds: [1] }), pieces.length, [0], tokenizer, undefined, constraint, { minTokens: 1, tokenIds: [26, 27] });
    // 'x.' opens the gate: the stop token is not allowed after it, so it does not end the answer.
    expect((await out.next(favour(27))).done).toBeUndefined();
    const masks = constraint.masks;
    expect((await out.next(favour(0))).done).toBeUndefined();
    expect(constraint.masks).toBe(masks); // the mask computed early was used for this position
    constraint.open = false;
    expect((await out.next(favour(26))).done).toMatchObject({ finishReason: 'stop', usage: { completionTokens: 3 } });
  });
});
