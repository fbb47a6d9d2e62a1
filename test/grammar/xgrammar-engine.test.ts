import { Ajv } from 'ajv';
import { afterAll, describe, expect, it } from 'vitest';
import { GrammarError } from '../../src/core/sampling/grammar/output-grammar.ts';
import { XGrammarEngine } from '../../src/core/sampling/grammar/xgrammar-engine.ts';
import { ConstraintViolationError, maskAllows } from '../../src/core/sampling/index.ts';
import type { GrammarEngine } from '../../src/core/sampling/grammar/output-grammar.ts';
import { WorkerGrammarEngine } from '../../src/node/grammar-worker.ts';
import { loadXGrammar } from '../../src/node/xgrammar-node.ts';
import { QWEN_EOS, QWEN_VOCAB, qwenTokenizer } from './qwen-fixture.ts';
import { randomWalk } from './walk.ts';

const { tokenizer } = qwenTokenizer();
const options = { vocabSize: QWEN_VOCAB, stopTokenIds: [QWEN_EOS] };
// The same behaviour on this thread and in the head's grammar worker (src/node/grammar-worker.ts).
const engines: [string, GrammarEngine][] = [
  ['XGrammarEngine', new XGrammarEngine(loadXGrammar, tokenizer.vocabulary(QWEN_VOCAB), options)],
  ['WorkerGrammarEngine', new WorkerGrammarEngine(tokenizer.vocabulary(QWEN_VOCAB), options)],
];
afterAll(() => engines.forEach(([, engine]) => engine.dispose()));

const text = (ids: number[]) => tokenizer.decode(ids.filter((id) => id !== QWEN_EOS));

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    kind: { enum: ['cat', 'dog', 'owl'] },
    tags: { type: 'array', items: { type: 'string', maxLength: 4 }, maxItems: 3 },
    owner: { type: 'object', properties: { id: { type: 'integer', minimum: 0, maximum: 999 }, verified: { type: 'boolean' } }, required: ['id', 'verified'], additionalProperties: false },
  },
  required: ['name', 'kind', 'tags', 'owner'],
  additionalProperties: false,
} as const;

describe.each(engines)('%s (Qwen2.5 vocabulary, 151,936 logits)', (_name, engine) => {
  it('random walks through a bounded schema always end in schema-valid JSON and the stop token', async () => {
    const validate = new Ajv().compile(schema);
    for (let seed = 1; seed <= 4; seed++) {
      const constraint = await engine.constraint({ kind: 'json_schema', schema });
      const ids = await randomWalk(constraint, QWEN_VOCAB, seed);
      expect(constraint.finished).toBe(true);
      expect(ids.at(-1)).toBe(QWEN_EOS);
      const value = JSON.parse(text(ids)); // throws on invalid JSON (e.g. a raw control character)
      expect(validate(value), JSON.stringify(validate.errors)).toBe(true);
      constraint.dispose();
    }
  });

  it('json_object gives a JSON object; special tokens are never allowed inside it', async () => {
    const constraint = await engine.constraint({ kind: 'json_object' });
    const first = (await constraint.nextMask())!;
    const specials = [...tokenizer.specialTokens.ids.values()];
    expect(specials.filter((id) => maskAllows(first, id))).toEqual([]);
    expect(maskAllows(first, tokenizer.encode('{', { addSpecialTokens: false })[0])).toBe(true);
    expect(maskAllows(first, tokenizer.encode('[', { addSpecialTokens: false })[0])).toBe(false);
    constraint.accept(tokenizer.encode('{', { addSpecialTokens: false })[0]);
    await constraint.nextMask(); // the sampler's order: the mask, then the token drawn from it
    expect(() => constraint.accept(tokenizer.encode('x', { addSpecialTokens: false })[0])).toThrow(ConstraintViolationError);
    for (const id of tokenizer.encode('"a": [1, true]}', { addSpecialTokens: false })) constraint.accept(id);
    const end = (await constraint.nextMask())!;
    expect(maskAllows(end, QWEN_EOS)).toBe(true);
    constraint.accept(QWEN_EOS);
    expect(constraint.finished).toBe(true);
    constraint.dispose();
  });

  it('rollback and fork: a fork continues from the same state, independently', async () => {
    const constraint = await engine.constraint({ kind: 'json_schema', schema });
    const prefix = tokenizer.encode('{"name": "Rex", "kind": "', { addSpecialTokens: false });
    for (const id of prefix) constraint.accept(id);
    const fork = await constraint.fork();
    const dog = tokenizer.encode('dog', { addSpecialTokens: false });
    for (const id of dog) fork.accept(id);
    constraint.rollback(2); // back to '{"name": "Rex", "kind'
    expect(() => constraint.rollback(prefix.length)).toThrow(RangeError);
    for (const id of prefix.slice(-2)) constraint.accept(id);
    for (const id of tokenizer.encode('owl', { addSpecialTokens: false })) constraint.accept(id);
    await fork.nextMask();
    expect(() => fork.accept(tokenizer.encode('owl', { addSpecialTokens: false })[0])).toThrow(ConstraintViolationError);
    fork.dispose();
    constraint.dispose();
    expect(() => constraint.accept(1)).toThrow(/disposed/);
  });

  it('a schema xgrammar cannot compile is a GrammarError naming the problem, and the engine keeps working', async () => {
    await expect(engine.constraint({ kind: 'json_schema', schema: { type: 'frobnicate' } })).rejects.toThrow(GrammarError);
    await expect(engine.constraint({ kind: 'json_schema', schema: { type: 'string', minLength: 5, maxLength: 2 } })).rejects.toThrow(/minLength 5 is greater than maxLength 2/);
    await expect(engine.constraint({ kind: 'json_schema', schema: { $ref: '#/$defs/missing' } })).rejects.toThrow(GrammarError);
    const constraint = await engine.constraint({ kind: 'json_schema', schema: { type: 'boolean' } });
    const ids = await randomWalk(constraint, QWEN_VOCAB, 1);
    expect(['true', 'false']).toContain(text(ids));
    constraint.dispose();
  });
});
