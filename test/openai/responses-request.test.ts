/** `/v1/responses` bodies → the chat request and the echoed fields; every refusal's shape. */
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/node/openai/errors.ts';
import { parseChatRequest } from '../../src/node/openai/requests.ts';
import { parseResponsesRequest } from '../../src/node/openai/responses-request.ts';

const MODEL = 'm';
const defaults = { maxTokens: 100 };
const parse = (extra: Record<string, unknown>) => parseResponsesRequest({ model: MODEL, input: 'hi', ...extra }, MODEL, defaults);

function refusal(extra: Record<string, unknown>): ApiError {
  try {
    parse(extra);
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    return error as ApiError;
  }
  throw new Error(`expected a refusal of ${JSON.stringify(extra).slice(0, 200)}`);
}

describe('translation to the chat request', () => {
  it('a string input is one user message; the rest takes chat defaults', () => {
    const { chat, echo } = parse({});
    expect(chat).toStrictEqual({
      kind: 'chat',
      messages: [{ role: 'user', content: 'hi' }],
      model: MODEL,
      sampling: { maxTokens: 100 },
      maxTokensRequested: false,
      stopStrings: [],
      stream: false,
      includeUsage: false,
      logprobs: false,
      topLogprobs: 0,
    });
    expect(echo).toStrictEqual({
      instructions: null,
      maxOutputTokens: null,
      temperature: 1,
      topP: 1,
      topLogprobs: 0,
      metadata: {},
      safetyIdentifier: null,
      promptCacheKey: null,
      truncation: 'disabled',
      parallelToolCalls: true,
      toolChoice: 'auto',
      verbosity: 'medium',
    });
  });

  it('message items become the same messages the chat route builds', () => {
    const input = [
      { role: 'developer', content: 'Be brief.' },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello' }, { type: 'input_text', text: 'there' }] },
      { type: 'message', role: 'assistant', id: 'msg_1', status: 'completed', content: [{ type: 'output_text', text: 'Hi', annotations: [] }] },
      { role: 'system', content: 'Really.', phase: null },
      { role: 'user', content: 'Again' },
    ];
    const { chat } = parse({ input, instructions: 'You are meshnet.' });
    const viaChat = parseChatRequest(
      {
        model: MODEL,
        messages: [
          { role: 'system', content: 'You are meshnet.' },
          { role: 'developer', content: 'Be brief.' },
          { role: 'user', content: [{ type: 'text', text: 'Hello' }, { type: 'text', text: 'there' }] },
          { role: 'assistant', content: 'Hi' },
          { role: 'system', content: 'Really.' },
          { role: 'user', content: 'Again' },
        ],
      },
      MODEL,
      defaults,
    );
    expect(chat.messages).toStrictEqual(viaChat.messages);
  });

  it('takes max_output_tokens, temperature, top_p, seed, stream and logprobs', () => {
    const { chat, echo } = parse({
      max_output_tokens: 7,
      temperature: 0.5,
      top_p: 0.9,
      seed: 3,
      stream: true,
      stream_options: { include_obfuscation: false },
      include: ['message.output_text.logprobs', 'reasoning.encrypted_content'],
      top_logprobs: 2,
    });
    expect(chat.sampling).toStrictEqual({ temperature: 0.5, topP: 0.9, seed: 3, maxTokens: 7, logprobs: true, topLogprobs: 2 });
    expect(chat).toMatchObject({ maxTokensRequested: true, stream: true, logprobs: true, topLogprobs: 2 });
    expect(echo).toMatchObject({ maxOutputTokens: 7, temperature: 0.5, topP: 0.9, topLogprobs: 2 });
  });

  it('top_logprobs without the logprobs include asks for nothing', () => {
    expect(parse({ top_logprobs: 5 }).chat).toMatchObject({ logprobs: false, topLogprobs: 0 });
  });

  it('accepts and ignores what clients send by default, echoing the settings', () => {
    const { chat, echo } = parse({
      store: false,
      metadata: { run: '1', who: 'test' },
      include: [],
      truncation: 'auto',
      user: 'u-1',
      parallel_tool_calls: false,
      service_tier: 'auto',
      safety_identifier: 'sid',
      prompt_cache_key: 'pck',
      max_tool_calls: 3,
      reasoning: { effort: null, summary: null },
      text: { format: { type: 'text' }, verbosity: 'low' },
      tools: [],
      tool_choice: 'none',
      previous_response_id: null,
      conversation: null,
      background: false,
      unknown_future_field: { anything: true },
    });
    expect(chat.messages).toEqual([{ role: 'user', content: 'hi' }]);
    expect(chat.user).toBe('u-1');
    expect(echo).toMatchObject({ metadata: { run: '1', who: 'test' }, truncation: 'auto', user: 'u-1', parallelToolCalls: false, safetyIdentifier: 'sid', promptCacheKey: 'pck', toolChoice: 'none', verbosity: 'low' });
    expect(parse({ reasoning: {} }).chat.messages).toHaveLength(1);
    expect(parse({ reasoning: { effort: 'none' } }).chat.messages).toHaveLength(1);
  });
});

const long = 'x'.repeat(100_000);
/** [name, body fields, param, code, message fragment] */
const refusals: [string, Record<string, unknown>, string | null, string, string][] = [
  // input
  ['missing input', { input: undefined }, 'input', 'missing_required_parameter', "Missing required parameter: 'input'."],
  ['input null', { input: null }, 'input', 'missing_required_parameter', 'input'],
  ['input a number', { input: 42 }, 'input', 'invalid_type', 'expected one of a string or an array of input items, but got an integer'],
  ['input an object', { input: { role: 'user' } }, 'input', 'invalid_type', 'but got an object'],
  ['input empty', { input: [] }, 'input', 'empty_array', 'empty array'],
  ['an item that is a string', { input: ['hi'] }, 'input[0]', 'invalid_type', 'expected an object, but got a string'],
  ['an unknown item type', { input: [{ type: 'telepathy', role: 'user', content: 'x' }] }, 'input[0].type', 'invalid_value', "'telepathy' is not supported. Supported values are: 'message'."],
  ['an item type that is a number', { input: [{ type: 7, role: 'user', content: 'x' }] }, 'input[0].type', 'invalid_type', 'expected a string'],
  ['a huge unknown item type', { input: [{ type: long, role: 'user', content: 'x' }] }, 'input[0].type', 'invalid_value', 'is not supported'],
  ['a function_call item', { input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' }] }, 'input[0].type', 'unsupported_parameter', "'function_call' items are not supported yet"],
  ['a function_call_output item', { input: [{ type: 'function_call_output', call_id: 'c', output: 'x' }] }, 'input[0].type', 'unsupported_parameter', "'function_call_output' items"],
  ['an item_reference', { input: [{ type: 'item_reference', id: 'msg_1' }] }, 'input[0].type', 'unsupported_parameter', 'stores no responses'],
  ['a reasoning item', { input: [{ type: 'reasoning', id: 'rs_1', summary: [] }] }, 'input[0].type', 'unsupported_parameter', 'does not reason'],
  ['a web_search_call item', { input: [{ type: 'web_search_call', id: 'ws_1' }] }, 'input[0].type', 'unsupported_parameter', 'no built-in tools'],
  ['a computer_call_output item', { input: [{ type: 'computer_call_output', call_id: 'c' }] }, 'input[0].type', 'unsupported_parameter', "'computer_call_output'"],
  ['a missing role', { input: [{ content: 'x' }] }, 'input[0].role', 'missing_required_parameter', 'input[0].role'],
  ['a prototype-named role', { input: [{ role: 'toString', content: 'x' }] }, 'input[0].role', 'invalid_value', "'toString' is not supported"],
  ['a prototype-named part type', { input: [{ role: 'user', content: [{ type: 'constructor' }] }] }, 'input[0].content[0].type', 'invalid_value', "'constructor' is not supported"],
  ['a tool role', { input: [{ role: 'tool', content: 'x' }] }, 'input[0].role', 'invalid_value', "'tool' is not supported"],
  ['a role that is an array', { input: [{ role: ['user'], content: 'x' }] }, 'input[0].role', 'invalid_type', 'expected a string, but got an array'],
  ['missing content', { input: [{ role: 'user' }] }, 'input[0].content', 'missing_required_parameter', 'input[0].content'],
  ['content a number', { input: [{ role: 'user', content: 1 }] }, 'input[0].content', 'invalid_type', 'one of a string or an array of content parts'],
  ['content empty', { input: [{ role: 'user', content: [] }] }, 'input[0].content', 'empty_array', 'empty array'],
  ['a part that is a string', { input: [{ role: 'user', content: ['x'] }] }, 'input[0].content[0]', 'invalid_type', 'expected an object'],
  ['a part without type', { input: [{ role: 'user', content: [{ text: 'x' }] }] }, 'input[0].content[0].type', 'missing_required_parameter', 'type'],
  ['an image part', { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'data:image/png;base64,AA' }] }] }, 'input[0].content[0].type', 'unsupported_parameter', 'no images'],
  ['a file part', { input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-1' }] }] }, 'input[0].content[0].type', 'unsupported_parameter', 'no files'],
  ['an audio part', { input: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AA', format: 'wav' } }] }] }, 'input[0].content[0].type', 'unsupported_parameter', 'no audio'],
  ['a refusal part', { input: [{ role: 'assistant', content: [{ type: 'refusal', refusal: 'no' }] }] }, 'input[0].content[0].type', 'unsupported_parameter', 'refusal'],
  ['an unknown part type', { input: [{ role: 'user', content: [{ type: 'text', text: 'x' }] }] }, 'input[0].content[0].type', 'invalid_value', "Supported values are: 'input_text' and 'output_text'"],
  ['a part text that is a number', { input: [{ role: 'user', content: [{ type: 'input_text', text: 5 }] }] }, 'input[0].content[0].text', 'invalid_type', 'expected a string'],
  ['a part without text', { input: [{ role: 'user', content: [{ type: 'output_text' }] }] }, 'input[0].content[0].text', 'missing_required_parameter', 'text'],
  // top-level fields
  ['model missing', { model: undefined }, 'model', 'missing_required_parameter', 'model'],
  ['instructions a number', { instructions: 1 }, 'instructions', 'invalid_type', 'expected a string'],
  ['max_output_tokens zero', { max_output_tokens: 0 }, 'max_output_tokens', 'integer_below_min_value', 'Expected a value >= 1'],
  ['max_output_tokens a string', { max_output_tokens: '16' }, 'max_output_tokens', 'invalid_type', 'expected an integer'],
  ['max_output_tokens 2^60', { max_output_tokens: 2 ** 60 }, 'max_output_tokens', 'integer_above_max_value', 'Expected a value <='],
  ['temperature 3', { temperature: 3 }, 'temperature', 'decimal_above_max_value', 'Expected a value <= 2'],
  ['temperature a string', { temperature: 'hot' }, 'temperature', 'invalid_type', 'expected a number'],
  ['top_p 0', { top_p: 0 }, 'top_p', 'decimal_below_min_value', 'Expected a value > 0'],
  ['top_logprobs 21', { top_logprobs: 21 }, 'top_logprobs', 'integer_above_max_value', '<= 20'],
  ['stream a string', { stream: 'yes' }, 'stream', 'invalid_type', 'expected a boolean'],
  ['stream_options a list', { stream: true, stream_options: [] }, 'stream_options', 'invalid_type', 'expected an object'],
  ['include_obfuscation a string', { stream: true, stream_options: { include_obfuscation: 'no' } }, 'stream_options.include_obfuscation', 'invalid_type', 'expected a boolean'],
  ['include a string', { include: 'message.output_text.logprobs' }, 'include', 'invalid_type', 'expected an array of strings'],
  ['include an unknown value', { include: ['everything'] }, 'include[0]', 'invalid_value', "'everything' is not supported"],
  ['store a string', { store: 'false' }, 'store', 'invalid_type', 'expected a boolean'],
  ['metadata a list', { metadata: ['a'] }, 'metadata', 'invalid_type', 'expected an object'],
  ['metadata with a number', { metadata: { a: 1 } }, 'metadata.a', 'invalid_type', 'expected a string'],
  ['metadata with 17 keys', { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata', 'object_above_max_properties', 'at most 16'],
  ['metadata with a huge value', { metadata: { a: long } }, 'metadata.a', 'string_above_max_length', 'maximum length 512'],
  ['metadata with a huge key', { metadata: { [long]: 'v' } }, 'metadata', 'invalid_value', 'at most 64'],
  ['truncation unknown', { truncation: 'sometimes' }, 'truncation', 'invalid_value', "Supported values are: 'auto', 'disabled'"],
  ['user a number', { user: 1 }, 'user', 'invalid_type', 'expected a string'],
  ['parallel_tool_calls a string', { parallel_tool_calls: 'true' }, 'parallel_tool_calls', 'invalid_type', 'expected a boolean'],
  ['service_tier a number', { service_tier: 1 }, 'service_tier', 'invalid_type', 'expected a string'],
  ['max_tool_calls zero', { max_tool_calls: 0 }, 'max_tool_calls', 'integer_below_min_value', '>= 1'],
  ['text a string', { text: 'json' }, 'text', 'invalid_type', 'expected an object'],
  ['text.format a string', { text: { format: 'text' } }, 'text.format', 'invalid_type', 'expected an object'],
  ['text.format without type', { text: { format: {} } }, 'text.format.type', 'missing_required_parameter', 'text.format.type'],
  ['text.format unknown', { text: { format: { type: 'yaml' } } }, 'text.format.type', 'invalid_value', "'yaml' is not supported"],
  ['text.verbosity unknown', { text: { verbosity: 'loud' } }, 'text.verbosity', 'invalid_value', "'loud'"],
  // refused features
  ['previous_response_id', { previous_response_id: 'resp_1' }, 'previous_response_id', 'unsupported_parameter', 'stores no responses'],
  ['previous_response_id a number', { previous_response_id: 1 }, 'previous_response_id', 'invalid_type', 'expected a string'],
  ['conversation', { conversation: 'conv_1' }, 'conversation', 'unsupported_parameter', 'stores no conversations'],
  ['background', { background: true }, 'background', 'unsupported_parameter', 'while the request is open'],
  ['prompt templates', { prompt: { id: 'pmpt_1' } }, 'prompt', 'unsupported_parameter', 'prompt templates'],
  ['context_management', { context_management: [{ type: 'compaction' }] }, 'context_management', 'unsupported_parameter', 'context_management'],
  ['reasoning effort', { reasoning: { effort: 'high' } }, 'reasoning.effort', 'unsupported_parameter', 'does not reason'],
  ['reasoning summary', { reasoning: { summary: 'auto' } }, 'reasoning.summary', 'unsupported_parameter', 'does not reason'],
  ['reasoning a string', { reasoning: 'high' }, 'reasoning', 'invalid_type', 'expected an object'],
  ['web_search', { tools: [{ type: 'web_search' }] }, 'tools[0].type', 'unsupported_parameter', "'web_search' is not supported: this server offers no built-in tools"],
  ['file_search', { tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }, 'tools[0].type', 'unsupported_parameter', "'file_search'"],
  ['computer_use_preview', { tools: [{ type: 'computer_use_preview', display_width: 1, display_height: 1, environment: 'browser' }] }, 'tools[0].type', 'unsupported_parameter', "'computer_use_preview'"],
  ['a built-in tool after a function', { tools: [{ type: 'function', name: 'f' }, { type: 'code_interpreter' }] }, 'tools[1].type', 'unsupported_parameter', "'code_interpreter'"],
  ['a tool without type', { tools: [{ name: 'f' }] }, 'tools[0].type', 'missing_required_parameter', 'tools[0].type'],
  ['a tool that is a string', { tools: ['web_search'] }, 'tools[0]', 'invalid_type', 'expected an object'],
  ['tools an object', { tools: { type: 'function' } }, 'tools', 'invalid_type', 'expected an array'],
  ['function tools (until tool calls land)', { tools: [{ type: 'function', name: 'f', parameters: {} }] }, 'tools', 'unsupported_parameter', 'function tools is not supported yet'],
  ['tool_choice required', { tool_choice: 'required' }, 'tool_choice', 'unsupported_parameter', 'no tools are available'],
  ['tool_choice a function', { tool_choice: { type: 'function', name: 'f' } }, 'tool_choice', 'unsupported_parameter', 'no tools'],
  ['tool_choice a number', { tool_choice: 1 }, 'tool_choice', 'invalid_type', 'one of a string or an object'],
  ['text.format json_schema (until structured output lands)', { text: { format: { type: 'json_schema', name: 'x', schema: {} } } }, 'text.format', 'unsupported_parameter', "'json_schema' is not supported yet"],
  ['text.format json_object', { text: { format: { type: 'json_object' } } }, 'text.format', 'unsupported_parameter', "'json_object'"],
];

describe('refusals', () => {
  it.each(refusals)('%s', (_name, extra, param, code, fragment) => {
    const err = refusal(extra);
    expect(err.status).toBe(400);
    expect(err.type).toBe('invalid_request_error');
    expect(err.param).toBe(param);
    expect(err.code).toBe(code);
    expect(err.message).toContain(fragment);
    expect(err.message.length).toBeLessThan(600); // a huge field is never echoed whole
  });

  it('refuses a body that is not an object, and another model with 404', () => {
    for (const body of [null, [], 'x', 3]) expect(() => parseResponsesRequest(body, MODEL, defaults)).toThrow(/expected a JSON object/);
    expect(() => parseResponsesRequest({ model: 'gpt-4o', input: 'x' }, MODEL, defaults)).toThrow(expect.objectContaining({ status: 404, code: 'model_not_found' }));
  });
});
