/** The OpenAPI → Ajv conversion: a valid JSON Schema document, its rules, and a validator that can fail. */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { COMPLETION_STREAM_CHUNK, loadSpecSchemas, specErrors } from './spec-schemas.ts';

const schemas = loadSpecSchemas() as Record<string, Record<string, unknown>>;

describe('the converted spec', () => {
  it('is a valid JSON Schema 2020-12 document (validators skip this check for speed)', () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    expect(ajv.validateSchema({ $defs: schemas }), JSON.stringify(ajv.errors?.slice(0, 3))).toBe(true);
  });

  it('keeps no OpenAPI-only keyword', () => {
    const found = new Set<string>();
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) return node.forEach(walk);
      if (typeof node !== 'object' || node === null) return;
      for (const [key, value] of Object.entries(node)) {
        if (['nullable', 'discriminator', '$recursiveRef', '$recursiveAnchor', 'example'].includes(key) || key.startsWith('x-')) found.add(key);
        if (key === '$ref' && typeof value === 'string' && !value.startsWith('#/$defs/')) found.add(value);
        // `properties` maps names to schemas: walk the schemas, not the names.
        if (key === 'properties' && typeof value === 'object' && value !== null) Object.values(value).forEach(walk);
        else walk(value);
      }
    };
    walk(schemas);
    expect([...found]).toEqual([]);
  });

  it('reads nullable as "or null"', () => {
    const chunk = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: null }] };
    expect(specErrors('CreateChatCompletionStreamResponse', chunk)).toBeUndefined();
    expect(specErrors('CreateChatCompletionStreamResponse', { ...chunk, usage: null })).toBeUndefined();
    expect(specErrors('CreateChatCompletionStreamResponse', { ...chunk, choices: [{ ...chunk.choices[0], finish_reason: 'sleepy' }] })).toMatch(/finish_reason/);
  });

  it('follows the recursive filter schema', () => {
    const filter = { type: 'and', filters: [{ type: 'eq', key: 'a', value: 1 }, { type: 'or', filters: [{ type: 'ne', key: 'b', value: 'x' }] }] };
    expect(specErrors('CompoundFilter', filter)).toBeUndefined();
    expect(specErrors('CompoundFilter', { type: 'and', filters: [{ type: 'or', filters: [{ type: 'eq' }] }] })).toBeDefined();
  });

  it('refuses keys the spec does not know, also through allOf', () => {
    const error = { error: { message: 'm', type: 't', param: null, code: null } };
    expect(specErrors('ErrorResponse', error)).toBeUndefined();
    expect(specErrors('ErrorResponse', { error: { ...error.error, detail: 'x' } })).toMatch(/unevaluated properties \(detail\)/);
    const response = { id: 'resp_1', object: 'response', created_at: 1, error: null, incomplete_details: null, instructions: null, model: 'm', tools: [], output: [], parallel_tool_calls: true, metadata: {}, tool_choice: 'auto', temperature: 1, top_p: 1 };
    expect(specErrors('Response', response)).toBeUndefined();
    expect(specErrors('Response', { ...response, store: true })).toMatch(/\(store\)/);
  });

  it('catches the schema bugs this server had: logprobs without refusal, completion chunks with usage null', () => {
    const logprobs = { content: [{ token: 'a', logprob: -1, bytes: [97], top_logprobs: [] }] };
    const completion = { id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'a', refusal: null }, logprobs, finish_reason: 'stop' }] };
    expect(specErrors('CreateChatCompletionResponse', completion)).toMatch(/refusal/);
    expect(specErrors('CreateChatCompletionResponse', { ...completion, choices: [{ ...completion.choices[0], logprobs: { ...logprobs, refusal: null } }] })).toBeUndefined();
    const chunk = { id: 'c', object: 'text_completion', created: 1, model: 'm', choices: [{ text: 'a', index: 0, logprobs: null, finish_reason: null }] };
    expect(specErrors(COMPLETION_STREAM_CHUNK, chunk)).toBeUndefined();
    expect(specErrors(COMPLETION_STREAM_CHUNK, { ...chunk, usage: null })).toMatch(/usage/);
    expect(specErrors('CreateCompletionResponse', chunk)).toMatch(/finish_reason/); // whole completions always finish
  });

  it('names the member of a typed union that failed', () => {
    expect(specErrors('ResponseStreamEvent', { type: 'response.output_text.delta', item_id: 'i', output_index: 0, content_index: 0, delta: 1, sequence_number: 0, logprobs: [] })).toMatch(
      /^\(as ResponseTextDeltaEvent\) \/delta: must be string/,
    );
  });
});
