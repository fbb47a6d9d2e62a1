import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { afterAll, describe, expect, it } from 'vitest';
import { createTokenizer } from '../../src/core/model/tokenizer.ts';
import { planStructuredChat } from '../../src/core/model/structured-output.ts';
import { ToolCallParser, type ToolStreamEvent } from '../../src/core/model/tools/tool-call-parser.ts';
import { TOOL_CALL_FORMATS, detectToolCallFormat, toolArgumentsSchema, toolCallGrammar } from '../../src/core/model/tools/tool-call-format.ts';
import type { ToolFunction } from '../../src/core/model/tools/tool-types.ts';
import { XGrammarEngine } from '../../src/core/sampling/grammar/xgrammar-engine.ts';
import { loadXGrammar } from '../../src/node/xgrammar-node.ts';
import { PHI3_DIR, QWEN3_CONFIG, QWEN_EOS, QWEN_VOCAB, qwenTokenizer, tokenizerFrom } from './qwen-fixture.ts';
import { randomWalk } from './walk.ts';

const weather: ToolFunction = {
  name: 'get_weather',
  description: 'Current weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 10 }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'], additionalProperties: false },
};
const time: ToolFunction = { name: 'get_time', parameters: { type: 'object', properties: { zone: { enum: ['utc', 'cet'] } }, required: ['zone'] } };

let n = 0;
const ids = () => `call_${++n}`;

function parseAll(text: string, format = TOOL_CALL_FORMATS.hermes, pieces = 1, callsOnly = false) {
  const parser = new ToolCallParser(format.syntax, ids, callsOnly);
  const events: ToolStreamEvent[] = [];
  const step = Math.max(1, Math.ceil(text.length / pieces));
  for (let i = 0; i < text.length; i += step) events.push(...parser.push(text.slice(i, i + step)));
  events.push(...parser.finish());
  return { parser, events };
}

describe('ToolCallParser', () => {
  const answer = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo} </tool_call>", "unit": "c"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "utc"}}\n</tool_call>';

  it('splits text and calls the same way however the text is streamed', () => {
    for (const pieces of [1, 3, 17, answer.length]) {
      const { parser, events } = parseAll(answer, TOOL_CALL_FORMATS.hermes, pieces);
      expect(parser.text).toBe('Let me check.\n');
      expect(parser.calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
        ['get_weather', { city: 'Oslo} </tool_call>', unit: 'c' }],
        ['get_time', { zone: 'utc' }],
      ]);
      // Deltas: a call event before its arguments, arguments concatenate to the final text.
      const first = events.findIndex((e) => e.type === 'call');
      expect(events.slice(0, first).every((e) => e.type === 'content')).toBe(true);
      const args = events.filter((e) => e.type === 'arguments' && e.index === 0).map((e) => (e as { text: string }).text).join('');
      expect(args).toBe(parser.calls[0].arguments);
    }
  });

  it('plain text with a near miss of the marker stays text', () => {
    const { parser } = parseAll('a <tool_cal and <tool> done', TOOL_CALL_FORMATS.hermes, 5);
    expect(parser.text).toBe('a <tool_cal and <tool> done');
    expect(parser.calls).toEqual([]);
  });

  it('mistral and llama3 layouts', () => {
    const m = parseAll('[TOOL_CALLS][{"name": "get_time", "arguments": {"zone": "cet"}}, {"name": "get_weather", "arguments": {"city": "Rome", "unit": "f"}}]', TOOL_CALL_FORMATS.mistral, 7);
    expect(m.parser.calls.map((c) => c.name)).toEqual(['get_time', 'get_weather']);
    expect(m.parser.text).toBe('');
    const l = parseAll('{"name": "get_time", "parameters": {"zone": "utc"}}; {"name": "get_time", "parameters": {"zone": "cet"}}', TOOL_CALL_FORMATS.llama3_json, 4);
    expect(l.parser.calls.map((c) => JSON.parse(c.arguments).zone)).toEqual(['utc', 'cet']);
    expect(l.parser.text).toBe('');
  });
});

describe('ToolCallParser: an answer cut short (max_tokens)', () => {
  const whole = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "utc"}}\n</tool_call>';
  const nameEnd = whole.indexOf('get_weather') + 'get_weather'.length;

  it('every cut of a calls-only answer: a call with the arguments so far, or no call — never template text as content', () => {
    for (let cut = 1; cut <= whole.length; cut++) {
      for (const pieces of [1, 4, cut]) {
        const { parser } = parseAll(whole.slice(0, cut), TOOL_CALL_FORMATS.hermes, pieces, true);
        expect(parser.text, `cut ${cut}`).toBe('');
        if (cut <= nameEnd) expect(parser.calls, `cut ${cut}`).toEqual([]);
        else expect(parser.calls[0].name).toBe('get_weather');
        for (const call of parser.calls) expect(whole).toContain(call.arguments);
      }
    }
  });

  it('auto: text then a call cut inside its opening keeps the text and drops the opening once the trigger is written', () => {
    expect(parseAll('Sure. <tool_call>\n{"na').parser.text).toBe('Sure. ');
    expect(parseAll('Sure. <tool_call>').parser.text).toBe('Sure. ');
    // Before the whole trigger, free text may still end in what looks like its start.
    expect(parseAll('a <tool').parser.text).toBe('a <tool');
    expect(parseAll('a <tool', TOOL_CALL_FORMATS.hermes, 1, true).parser.text).toBe('a ');
  });

  it('parallel calls with a second one cut in its opening: the first call, no content', () => {
    const cut = whole.slice(0, whole.indexOf('get_time') - 2);
    for (const callsOnly of [false, true]) {
      const { parser } = parseAll(cut, TOOL_CALL_FORMATS.hermes, 3, callsOnly);
      expect(parser.text).toBe('');
      expect(parser.calls.map((c) => [c.name, c.arguments])).toEqual([['get_weather', '{"city": "Oslo", "unit": "c"}']]);
    }
  });

  it('mistral: a list cut between calls has no content', () => {
    const { parser } = parseAll('[TOOL_CALLS][{"name": "get_time", "arguments": {"zone": "cet"}}, {"na', TOOL_CALL_FORMATS.mistral, 5);
    expect(parser.text).toBe('');
    expect(parser.calls.map((c) => c.name)).toEqual(['get_time']);
  });
});

describe('toolArgumentsSchema: parameters normalized as OpenAI treats them', () => {
  it('missing, true, {} and a bare object schema take no arguments; a schema without type is an object', () => {
    const none = { type: 'object', properties: {}, additionalProperties: false };
    expect(toolArgumentsSchema(undefined)).toEqual(none);
    expect(toolArgumentsSchema(true)).toEqual(none);
    expect(toolArgumentsSchema({})).toEqual(none);
    expect(toolArgumentsSchema({ type: 'object' })).toEqual(none);
    expect(toolArgumentsSchema({ type: 'object', description: 'd' })).toEqual({ ...none, description: 'd' });
    expect(toolArgumentsSchema({ properties: { a: { type: 'string' } } })).toEqual({ type: 'object', properties: { a: { type: 'string' } } });
    expect(toolArgumentsSchema({ type: 'object', additionalProperties: true })).toEqual({ type: 'object', additionalProperties: true });
  });
});

describe('tool-call grammars on the Qwen2.5 vocabulary', () => {
  const { tokenizer } = qwenTokenizer();
  const engine = new XGrammarEngine(loadXGrammar, tokenizer.vocabulary(QWEN_VOCAB, ['[TOOL_CALLS]']), { vocabSize: QWEN_VOCAB, stopTokenIds: [QWEN_EOS] });
  afterAll(() => engine.dispose());
  const ajv = new Ajv();
  const validators = new Map([weather, time].map((t) => [t.name, ajv.compile(t.parameters as object)]));

  for (const name of ['hermes', 'llama3_json', 'mistral'] as const) {
    it(`${name}: required calls from random walks parse into valid calls to the offered tools`, async () => {
      const format = TOOL_CALL_FORMATS[name];
      const grammar = { kind: 'structural_tag', format: toolCallGrammar(format, [weather, time], { type: 'required' }, true) } as const;
      for (const seed of [1, 2]) {
        const constraint = await engine.constraint(grammar);
        const out = await randomWalk(constraint, QWEN_VOCAB, seed);
        expect(constraint.finished).toBe(true);
        constraint.dispose();
        const { parser } = parseAll(tokenizer.decode(out.slice(0, -1)), format, 9);
        expect(parser.calls.length).toBeGreaterThan(0);
        expect(parser.text.trim()).toBe('');
        for (const call of parser.calls) {
          const validate = validators.get(call.name)!;
          expect(validate(JSON.parse(call.arguments)), call.arguments).toBe(true);
        }
      }
    });
  }

  it('a named function with parallel_tool_calls false: exactly one call, to that function', async () => {
    const grammar = { kind: 'structural_tag', format: toolCallGrammar(TOOL_CALL_FORMATS.hermes, [weather, time], { type: 'function', name: 'get_time' }, false) } as const;
    const constraint = await engine.constraint(grammar);
    const out = await randomWalk(constraint, QWEN_VOCAB, 5);
    constraint.dispose();
    const { parser } = parseAll(tokenizer.decode(out.slice(0, -1)));
    expect(parser.calls.map((c) => c.name)).toEqual(['get_time']);
    expect(() => toolCallGrammar(TOOL_CALL_FORMATS.hermes, [weather], { type: 'function', name: 'nope' }, true)).toThrow(RangeError);
  });

  it('auto with a JSON response_format: the answer is calls or that JSON (any object for json_object)', async () => {
    for (const responseFormat of [{ type: 'json_object' }, { type: 'json_schema', name: 'r', schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false } }] as const) {
      const plan = planStructuredChat(tokenizer, { messages: [{ role: 'user', content: 'x' }], tools: { tools: [time], choice: { type: 'auto' }, parallel: true }, responseFormat });
      const kinds = new Set<string>();
      for (const seed of [1, 2, 3, 4, 5, 6]) {
        const constraint = await engine.constraint(plan.grammar!);
        const out = await randomWalk(constraint, QWEN_VOCAB, seed, 300);
        const finished = constraint.finished;
        constraint.dispose();
        const answer = tokenizer.decode(out.slice(0, finished ? -1 : undefined));
        const { parser } = parseAll(answer);
        if (parser.calls.length > 0) {
          kinds.add('calls');
          expect(parser.text.trim()).toBe('');
        } else if (finished) {
          kinds.add('json');
          const value = JSON.parse(answer) as Record<string, unknown>;
          if (responseFormat.type === 'json_schema') expect(Object.keys(value)).toEqual(['ok']);
        } else {
          expect(answer.startsWith('{')).toBe(true); // an open-ended object still being written
        }
      }
      expect(kinds.size).toBeGreaterThan(0);
    }
    // In JSON mode inside a structural tag, objects may have keys (not only `{}`).
    const constraint = await engine.constraint(planStructuredChat(tokenizer, { messages: [{ role: 'user', content: 'x' }], tools: { tools: [time], choice: { type: 'auto' }, parallel: true }, responseFormat: { type: 'json_object' } }).grammar!);
    for (const id of tokenizer.encode('{"any": 1}', { addSpecialTokens: false })) constraint.accept(id);
    constraint.dispose();
  });

  it('auto: text is free until the trigger, then the call is constrained', async () => {
    const grammar = { kind: 'structural_tag', format: toolCallGrammar(TOOL_CALL_FORMATS.hermes, [weather], { type: 'auto' }, true) } as const;
    const constraint = await engine.constraint(grammar);
    expect(await constraint.nextMask()).toBeDefined();
    for (const id of tokenizer.encode('Sure. <tool_call>\n{"name": "get_', { addSpecialTokens: false })) constraint.accept(id);
    const next = (await constraint.nextMask())!;
    const allowedText = [...Array(QWEN_VOCAB).keys()].filter((id) => (next[id >> 5] >>> (id & 31)) & 1).map((id) => tokenizer.decode([id]));
    expect(allowedText.every((t) => 'weather", "arguments": '.startsWith(t))).toBe(true);
    constraint.dispose();
  });
});

describe('chat templates with tools', () => {
  const messages = [
    { role: 'user', content: 'Weather in Oslo?' },
    { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city": "Oslo", "unit": "c"}' }] },
    { role: 'tool', content: '{"temp": 3}', toolCallId: 'call_1', name: 'get_weather' },
  ] as const;
  const tools = { tools: [weather], choice: { type: 'auto' }, parallel: true } as const;

  it('Qwen2.5 renders the tools, the call and the result in its own syntax', () => {
    const { prompt, toolFormat, grammar } = planStructuredChat(qwenTokenizer().tokenizer, { messages, tools });
    expect(toolFormat?.name).toBe('hermes');
    expect(grammar?.kind).toBe('structural_tag');
    expect(prompt).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather"');
    expect(prompt).toContain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}\n</tool_call>');
    expect(prompt).toContain('<|im_start|>user\n<tool_response>\n{"temp": 3}\n</tool_response><|im_end|>');
    expect(prompt.endsWith('<|im_start|>assistant\n')).toBe(true);
  });

  it('Qwen3 renders tools and tool results', () => {
    const qwen3 = createTokenizer(qwenTokenizer().json, JSON.parse(readFileSync(QWEN3_CONFIG, 'utf8')));
    expect(detectToolCallFormat(qwen3.chatTemplate.text).name).toBe('hermes');
    const { prompt } = planStructuredChat(qwen3, { messages, tools });
    expect(prompt).toContain('# Tools');
    expect(prompt).toContain('"name": "get_weather"');
    expect(prompt).toContain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}\n</tool_call>');
    expect(prompt).toContain('<tool_response>\n{"temp": 3}\n</tool_response>');
  });

  it('Phi-3 (no tool support) falls back to the documented generic format', () => {
    const phi3 = tokenizerFrom(PHI3_DIR);
    const { prompt, toolFormat } = planStructuredChat(phi3, { messages, tools });
    expect(toolFormat?.name).toBe('generic');
    expect(prompt.startsWith('<|system|>\nYou may call functions')).toBe(true);
    expect(prompt).toContain('<tools>\n{"type":"function","function":{"name":"get_weather"');
    expect(prompt).toContain('<|assistant|>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}\n</tool_call><|end|>');
    expect(prompt).toContain('<|user|>\n<tool_response>\n{"temp": 3}\n</tool_response><|end|>');
  });

  it('tool_choice none: no tools shown, no tool grammar; JSON response_format alone gives a JSON grammar', () => {
    const plan = planStructuredChat(qwenTokenizer().tokenizer, { messages: [messages[0]], tools: { ...tools, choice: { type: 'none' } }, responseFormat: { type: 'json_object' } });
    expect(plan.prompt).not.toContain('<tools>');
    expect(plan.toolFormat).toBeUndefined();
    expect(plan.grammar).toEqual({ kind: 'json_object' });
  });
});
