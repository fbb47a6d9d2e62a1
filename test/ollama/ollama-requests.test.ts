/** Ollama bodies → the OpenAI edge's requests: options, messages with tool turns, format, refusals. */
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/node/openai/errors.ts';
import { argumentsObject, ollamaToolCalls } from '../../src/node/ollama/ollama-answers.ts';
import { familyOf, parameterSize } from '../../src/node/ollama/ollama-models.ts';
import { parseOllamaOptions } from '../../src/node/ollama/ollama-options.ts';
import { parseFormat, parseOllamaChat, parseOllamaGenerate } from '../../src/node/ollama/ollama-requests.ts';

const refusal = (fn: () => unknown): ApiError => {
  try {
    fn();
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error('not refused');
};

describe('options', () => {
  it('maps Ollama names to the sampler and num_predict to the limit', () => {
    expect(parseOllamaOptions({ temperature: 0.5, top_p: 0.9, top_k: 20, min_p: 0.1, seed: 4, num_predict: 30, stop: ['\n'], repeat_penalty: 1.2, presence_penalty: 0.5, frequency_penalty: 0.25, num_ctx: 8192 })).toEqual({
      sampling: { temperature: 0.5, topP: 0.9, topK: 20, minP: 0.1, seed: 4, presencePenalty: 0.5, frequencyPenalty: 0.25, repetitionPenalty: 1.2 },
      maxTokens: 30,
      stopStrings: ['\n'],
    });
    expect(parseOllamaOptions({ num_predict: -1 }).maxTokens).toBeUndefined();
    expect(parseOllamaOptions({ repeat_penalty: 1.3, repeat_last_n: 0 }).sampling.repetitionPenalty).toBe(1);
    expect(parseOllamaOptions({ mirostat: 0, typical_p: 1 }).sampling).toEqual({});
  });

  it('refuses what would change the answer silently, naming options.NAME', () => {
    expect(refusal(() => parseOllamaOptions({ mirostat: 1 })).param).toBe('options.mirostat');
    expect(refusal(() => parseOllamaOptions({ repeat_last_n: 64 })).param).toBe('options.repeat_last_n');
    expect(refusal(() => parseOllamaOptions({ nope: 1 })).param).toBe('options.nope');
    expect(refusal(() => parseOllamaOptions({ top_p: 0 })).param).toBe('options.top_p');
    expect(refusal(() => parseOllamaOptions({ num_predict: 0 })).param).toBe('options.num_predict');
    expect(refusal(() => parseOllamaOptions({ stop: [''] })).param).toBe('options.stop[0]');
    expect(refusal(() => parseOllamaOptions([])).param).toBe('options');
  });
});

describe('chat and generate bodies', () => {
  it('tool turns answer the earliest open call of their function; arguments become JSON text', () => {
    const request = parseOllamaChat(
      {
        model: 'm:latest',
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: '', thinking: 'hmm', tool_calls: [{ function: { name: 'a', arguments: { x: 1 } } }, { function: { name: 'b', arguments: {} } }] },
          { role: 'tool', tool_name: 'b', content: 'B' },
          { role: 'tool', content: 'A' },
        ],
        stream: false,
      },
      'm',
    );
    expect(request.run?.kind).toBe('chat');
    const messages = request.run?.kind === 'chat' ? request.run.messages : [];
    expect(messages[1]).toEqual({ role: 'assistant', content: '', toolCalls: [{ id: 'call_1_0', name: 'a', arguments: '{"x":1}' }, { id: 'call_1_1', name: 'b', arguments: '{}' }] });
    expect(messages[2]).toMatchObject({ role: 'tool', toolCallId: 'call_1_1', name: 'b' });
    expect(messages[3]).toMatchObject({ role: 'tool', toolCallId: 'call_1_0' });
    expect(request.stream).toBe(false);
    expect(refusal(() => parseOllamaChat({ model: 'm', messages: [{ role: 'user', content: 'x', images: ['aGk='] }] }, 'm')).param).toBe('messages[0].images');
    expect(refusal(() => parseOllamaChat({ model: 'other', messages: [] }, 'm')).status).toBe(404);
    expect(parseOllamaChat({ model: 'm', messages: [] }, 'm')).toEqual({ endpoint: 'chat', model: 'm', stream: true });
    expect(parseOllamaChat({ model: 'm:latest', stream: false }, 'm').run).toBeUndefined();
    expect(refusal(() => parseOllamaChat({ model: 'm', messages: 'hi' }, 'm')).param).toBe('messages');
  });

  it('generate: template by default, raw as a completion prompt, an empty prompt loads', () => {
    const templated = parseOllamaGenerate({ model: 'm', prompt: 'p', system: 's' }, 'm');
    expect(templated.run).toMatchObject({ kind: 'chat', messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'p' }] });
    expect(templated.stream).toBe(true);
    expect(parseOllamaGenerate({ model: 'm', prompt: 'p', raw: true }, 'm').run).toMatchObject({ kind: 'completion', prompt: 'p' });
    expect(parseOllamaGenerate({ model: 'm' }, 'm').run).toBeUndefined();
    expect(refusal(() => parseOllamaGenerate({ model: 'm', prompt: 'p', raw: true, format: 'json' }, 'm')).param).toBe('format');
    expect(refusal(() => parseOllamaGenerate({ model: 'm', prompt: 'p', context: [1, 2] }, 'm')).param).toBe('context');
    expect(refusal(() => parseOllamaGenerate({ model: 'm', prompt: 'p', suffix: 'q' }, 'm')).param).toBe('suffix');
  });

  it('format: "json", a schema, or nothing', () => {
    expect(parseFormat('json')).toEqual({ type: 'json_object' });
    expect(parseFormat('')).toBeUndefined();
    expect(parseFormat({ type: 'object' })).toEqual({ type: 'json_schema', name: 'format', schema: { type: 'object' } });
    expect(refusal(() => parseFormat('yaml')).param).toBe('format');
    expect(refusal(() => parseFormat(3)).param).toBe('format');
  });
});

describe('answers and models', () => {
  it('tool calls carry object arguments; cut or non-object arguments are left out', () => {
    expect(argumentsObject('{"a":1}')).toEqual({ a: 1 });
    expect(argumentsObject('{"a":')).toBeUndefined();
    expect(argumentsObject('"text"')).toBeUndefined();
    expect(ollamaToolCalls([{ id: 'c1', name: 'f', arguments: '{"a"' }, { id: 'c2', name: 'g', arguments: '{}' }])).toEqual([{ id: 'c2', function: { index: 0, name: 'g', arguments: {} } }]);
  });

  it('parameter sizes and families read like Ollama\'s', () => {
    expect(parameterSize(231_552)).toBe('231.6K');
    expect(parameterSize(1_543_714_304)).toBe('1.5B');
    expect(parameterSize(7_000_000_000)).toBe('7B');
    expect(familyOf('Qwen2ForCausalLM')).toBe('qwen2');
  });
});
