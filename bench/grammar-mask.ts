/**
 * What grammar-constrained sampling costs per token: the xgrammar engine's mask for the next
 * token (`nextMask`), advancing it (`accept`) and applying the mask to the logits
 * (`applyTokenMask`), at a 49,152-token vocabulary (the first 49,152 tokens of Qwen2.5's
 * byte-level BPE: the size of SmolLM2's) and at Qwen2.5's full 151,936.
 *
 * Each grammar is walked by seeded random picks among the allowed tokens (what random
 * weights do), so every kind of grammar state is visited: keys, enums, bounded strings,
 * numbers, free text. Prints one JSON line (a {@link GrammarMaskReport}) on stdout.
 *
 *   node --import tsx bench/grammar-mask.ts [--steps N]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { readTokenVocabulary } from '../src/core/model/token-vocabulary.ts';
import { TOOL_CALL_FORMATS, toolCallGrammar } from '../src/core/model/tools/tool-call-format.ts';
import type { OutputGrammar } from '../src/core/sampling/grammar/output-grammar.ts';
import { XGrammarEngine } from '../src/core/sampling/grammar/xgrammar-engine.ts';
import { applyTokenMask, createRng, maskAllows } from '../src/core/sampling/index.ts';
import { loadXGrammar } from '../src/node/xgrammar-node.ts';

export interface GrammarMaskRow {
  readonly vocabSize: number;
  readonly grammar: string;
  readonly tokens: number;
  readonly compileMs: number;
  /** Per token, wall clock: nextMask + accept + applyTokenMask. */
  readonly meanMs: number;
  readonly p95Ms: number;
  readonly maxMs: number;
  /** The same in this process's CPU time (what the work costs whatever else the machine runs). */
  readonly meanCpuMs: number;
  readonly p95CpuMs: number;
}

export interface GrammarMaskReport {
  readonly rows: readonly GrammarMaskRow[];
}

const { values } = parseArgs({ options: { steps: { type: 'string', default: '400' } } });
const steps = Number(values.steps);
const tokenizerJson = JSON.parse(readFileSync(new URL('../test/fixtures/tokenizers/qwen2.5-instruct/tokenizer.json', import.meta.url), 'utf8')) as unknown;

const pet = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 16 },
    species: { enum: ['cat', 'dog', 'owl'] },
    age: { type: 'integer', minimum: 0, maximum: 30 },
    toys: { type: 'array', items: { type: 'string', maxLength: 8 }, maxItems: 3 },
    owner: { type: 'object', properties: { first: { type: 'string', maxLength: 10 }, verified: { type: 'boolean' } }, required: ['first', 'verified'] },
  },
  required: ['name', 'species', 'age', 'toys', 'owner'],
} as const;
const tools = [
  { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'] } },
  { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 6 } }, required: ['zone'] } },
] as const;

const grammars: [string, OutputGrammar][] = [
  ['json_schema (bounded)', { kind: 'json_schema', schema: pet }],
  ['json_object', { kind: 'json_object' }],
  ['tool calls (required)', { kind: 'structural_tag', format: toolCallGrammar(TOOL_CALL_FORMATS.hermes, tools, { type: 'required' }, true) }],
];

async function measure(vocabSize: number, stopId: number): Promise<GrammarMaskRow[]> {
  const vocabulary = readTokenVocabulary(tokenizerJson, vocabSize);
  const engine = new XGrammarEngine(loadXGrammar, vocabulary, { vocabSize, stopTokenIds: [stopId] });
  const logits = new Float64Array(vocabSize);
  const allowed = new Int32Array(vocabSize);
  const rows: GrammarMaskRow[] = [];
  for (const [name, grammar] of grammars) {
    const compileStart = performance.now();
    (await engine.constraint(grammar)).dispose();
    const compileMs = performance.now() - compileStart;
    const times: number[] = [];
    const cpu: number[] = [];
    const rng = createRng(7);
    let constraint = await engine.constraint(grammar);
    while (times.length < steps) {
      if (constraint.finished) {
        constraint.dispose();
        constraint = await engine.constraint(grammar);
      }
      logits.fill(0);
      const cpuStart = process.cpuUsage();
      const start = performance.now();
      const mask = await constraint.nextMask();
      if (mask) applyTokenMask(logits, mask);
      const maskMs = performance.now() - start;
      const maskCpu = process.cpuUsage(cpuStart);
      let n = 0; // (choosing among the allowed tokens is the sampler's work, not timed here)
      for (let i = 0; i < vocabSize; i++) if (!mask || maskAllows(mask, i)) allowed[n++] = i;
      const id = allowed[Math.floor(rng.next() * n)];
      const acceptStart = performance.now();
      const acceptCpuStart = process.cpuUsage();
      constraint.accept(id);
      times.push(maskMs + (performance.now() - acceptStart));
      const acceptCpu = process.cpuUsage(acceptCpuStart);
      cpu.push((maskCpu.user + maskCpu.system + acceptCpu.user + acceptCpu.system) / 1000);
    }
    constraint.dispose();
    times.sort((a, b) => a - b);
    cpu.sort((a, b) => a - b);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const p95 = (xs: number[]) => xs[Math.floor(xs.length * 0.95)];
    rows.push({ vocabSize, grammar: name, tokens: times.length, compileMs, meanMs: mean(times), p95Ms: p95(times), maxMs: times.at(-1)!, meanCpuMs: mean(cpu), p95CpuMs: p95(cpu) });
  }
  engine.dispose();
  return rows;
}

// Token 0 ('!') stands in for the stop token of the 49,152 cut (Qwen's own EOS is past it).
const rows = [...(await measure(49_152, 0)), ...(await measure(151_936, 151_645))];
process.stdout.write(`${JSON.stringify({ rows } satisfies GrammarMaskReport)}\n`);
