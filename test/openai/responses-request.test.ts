/** `/v1/responses` bodies → the chat request and the echoed fields; every refusal's shape. */
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/node/openai/errors.ts';
import { parseChatRequest } from '../../src/node/openai/requests.ts';
import { parseResponsesRequest } from '../../src/node/openai/responses-request.ts';

const MODEL = 'm';
const defaults = {};
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
      sampling: {},
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
      tools: [],
      textFormat: { type: 'text' },
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
    expect(chat).toMatchObject({ stream: true, logprobs: true, topLogprobs: 2 });
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

describe('tools, text.format and tool items', () => {
  const weather = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };

  it('function tools, tool_choice and parallel_tool_calls become the chat request\'s tools', () => {
    const { chat, echo } = parse({
      tools: [{ type: 'function', name: 'get_weather', description: 'Weather', parameters: weather, strict: true }, { type: 'function', name: 'noop' }],
      tool_choice: { type: 'function', name: 'get_weather' },
      parallel_tool_calls: false,
    });
    const viaChat = parseChatRequest(
      {
        model: MODEL,
        messages: [{ role: 'user', content: 'hi' }],
        tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: weather, strict: true } }, { type: 'function', function: { name: 'noop', strict: true } }],
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        parallel_tool_calls: false,
      },
      MODEL,
      defaults,
    );
    expect(chat.tools).toStrictEqual(viaChat.tools);
    expect(echo.tools).toStrictEqual([
      { type: 'function', name: 'get_weather', description: 'Weather', parameters: weather, strict: true },
      { type: 'function', name: 'noop', description: null, parameters: null, strict: true },
    ]);
    expect(echo).toMatchObject({ toolChoice: { type: 'function', name: 'get_weather' }, parallelToolCalls: false });
    for (const choice of ['auto', 'required', 'none'] as const) expect(parse({ tools: [fn('f')], tool_choice: choice }).chat.tools?.choice).toEqual({ type: choice });
    expect(parse({ tools: [fn('f')] }).chat.tools?.choice).toEqual({ type: 'auto' });
    expect(parse({ tools: [], tool_choice: 'none' }).chat.tools).toBeUndefined();
  });

  it('text.format json_schema and json_object become response_format', () => {
    const { chat, echo } = parse({ text: { format: { type: 'json_schema', name: 'city', schema: weather, strict: true, description: 'A city' }, verbosity: 'low' } });
    const viaChat = parseChatRequest({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_schema', json_schema: { name: 'city', schema: weather, strict: true } } }, MODEL, defaults);
    expect(chat.responseFormat).toStrictEqual(viaChat.responseFormat);
    expect(echo.textFormat).toStrictEqual({ type: 'json_schema', name: 'city', schema: weather, strict: true, description: 'A city' });
    expect(echo.verbosity).toBe('low');
    expect(parse({ text: { format: { type: 'json_object' } } }).chat.responseFormat).toEqual({ type: 'json_object' });
    expect(parse({ text: { format: { type: 'json_schema', name: 'x', schema: {} } } }).echo.textFormat).toMatchObject({ strict: null });
    expect(parse({ text: { format: { type: 'text' } } }).chat.responseFormat).toBeUndefined();
  });

  it('function_call and function_call_output items become the chat route\'s assistant tool_calls and tool turns', () => {
    const input = [
      { role: 'user', content: 'Weather in Oslo and Rome?' },
      { type: 'message', role: 'assistant', id: 'msg_1', status: 'completed', content: [{ type: 'output_text', text: 'Checking.', annotations: [], logprobs: [] }] },
      { type: 'function_call', id: 'fc_1', status: 'completed', call_id: 'call_a', name: 'get_weather', arguments: '{"city": "Oslo"}' },
      call('call_b', 'get_weather', '{"city": "Rome"}'),
      { type: 'function_call_output', call_id: 'call_a', output: '{"c": 3}' },
      { type: 'function_call_output', id: 'fco_1', status: 'completed', call_id: 'call_b', output: [{ type: 'input_text', text: '{"c":' }, { type: 'input_text', text: '20}' }] },
      call('call_c', 'noop'),
      { type: 'function_call_output', call_id: 'call_c', output: '' },
    ];
    const { chat } = parse({ input });
    const viaChat = parseChatRequest(
      {
        model: MODEL,
        messages: [
          { role: 'user', content: 'Weather in Oslo and Rome?' },
          {
            role: 'assistant',
            content: 'Checking.',
            tool_calls: [
              { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Oslo"}' } },
              { id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Rome"}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_a', name: 'get_weather', content: '{"c": 3}' },
          { role: 'tool', tool_call_id: 'call_b', name: 'get_weather', content: '{"c":\n20}' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_c', type: 'function', function: { name: 'noop', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'call_c', name: 'noop', content: '' },
        ],
      },
      MODEL,
      defaults,
    );
    expect(chat.messages).toStrictEqual(viaChat.messages);
  });
});

const long = 'x'.repeat(100_000);
const call = (id: string, name = 'f', args = '{}') => ({ type: 'function_call', call_id: id, name, arguments: args });
const fn = (name: string) => ({ type: 'function', name, parameters: { type: 'object', properties: {} } });
/** [name, body fields, param, code, message fragment] */
const refusals: [string, Record<string, unknown>, string | null, string, string][] = [
  // input
  ['missing input', { input: undefined }, 'input', 'missing_required_parameter', "Missing required parameter: 'input'."],
  ['input null', { input: null }, 'input', 'missing_required_parameter', 'input'],
  ['input a number', { input: 42 }, 'input', 'invalid_type', 'expected one of a string or an array of input items, but got an integer'],
  ['input an object', { input: { role: 'user' } }, 'input', 'invalid_type', 'but got an object'],
  ['input empty', { input: [] }, 'input', 'empty_array', 'empty array'],
  ['an item that is a string', { input: ['hi'] }, 'input[0]', 'invalid_type', 'expected an object, but got a string'],
  ['an unknown item type', { input: [{ type: 'telepathy', role: 'user', content: 'x' }] }, 'input[0].type', 'invalid_value', "'telepathy' is not supported. Supported values are: 'message', 'function_call', and 'function_call_output'."],
  ['an item type that is a number', { input: [{ type: 7, role: 'user', content: 'x' }] }, 'input[0].type', 'invalid_type', 'expected a string'],
  ['a huge unknown item type', { input: [{ type: long, role: 'user', content: 'x' }] }, 'input[0].type', 'invalid_value', 'is not supported'],
  ['a function_call without call_id', { input: [{ type: 'function_call', name: 'f', arguments: '{}' }] }, 'input[0].call_id', 'missing_required_parameter', "'input[0].call_id'"],
  ['a function_call without name', { input: [{ type: 'function_call', call_id: 'c', arguments: '{}' }] }, 'input[0].name', 'missing_required_parameter', "'input[0].name'"],
  ['function_call arguments an object', { input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: {} }] }, 'input[0].arguments', 'invalid_type', 'expected a string, but got an object'],
  ['a call id of 65 characters', { input: [{ type: 'function_call', call_id: 'c'.repeat(65), name: 'f', arguments: '{}' }] }, 'input[0].call_id', 'invalid_value', '1 to 64 characters'],
  ['a huge call id', { input: [{ type: 'function_call', call_id: long, name: 'f', arguments: '{}' }] }, 'input[0].call_id', 'invalid_value', '1 to 64 characters'],
  ['a call id used twice', { input: [call('c'), call('c')] }, 'input[1].call_id', 'invalid_value', "'c' is used twice"],
  ['a function_call_output before its call', { input: [{ type: 'function_call_output', call_id: 'c', output: 'x' }] }, 'input[0].call_id', 'invalid_value', 'No tool call found for function call output with call_id c'],
  ['a function_call_output for another call', { input: [call('a'), { type: 'function_call_output', call_id: 'b', output: 'x' }] }, 'input[1].call_id', 'invalid_value', 'call_id b'],
  ['a function_call_output without output', { input: [call('c'), { type: 'function_call_output', call_id: 'c' }] }, 'input[1].output', 'missing_required_parameter', "'input[1].output'"],
  ['a function_call_output output a number', { input: [call('c'), { type: 'function_call_output', call_id: 'c', output: 3 }] }, 'input[1].output', 'invalid_type', 'one of a string or an array of content parts'],
  ['a function_call_output with an image', { input: [call('c'), { type: 'function_call_output', call_id: 'c', output: [{ type: 'input_image', image_url: 'data:,' }] }] }, 'input[1].output[0].type', 'unsupported_parameter', 'no images'],
  ['a function_call_output with output_text', { input: [call('c'), { type: 'function_call_output', call_id: 'c', output: [{ type: 'output_text', text: 'x' }] }] }, 'input[1].output[0].type', 'invalid_value', "Supported values are: 'input_text'."],
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
  ['function parameters of an array', { tools: [{ type: 'function', name: 'f', parameters: { type: 'array' } }] }, 'tools[0].parameters', 'invalid_function_parameters', 'got \'type: "array"\''],
  ['a tool without type', { tools: [{ name: 'f' }] }, 'tools[0].type', 'missing_required_parameter', 'tools[0].type'],
  ['a tool that is a string', { tools: ['web_search'] }, 'tools[0]', 'invalid_type', 'expected an object'],
  ['tools an object', { tools: { type: 'function' } }, 'tools', 'invalid_type', 'expected an array'],
  ['a function tool without name', { tools: [{ type: 'function', parameters: {} }] }, 'tools[0].name', 'missing_required_parameter', "'tools[0].name'"],
  ['a function name with a space', { tools: [{ type: 'function', name: 'get weather' }] }, 'tools[0].name', 'invalid_value', 'does not match'],
  ['a huge function name', { tools: [{ type: 'function', name: long }] }, 'tools[0].name', 'invalid_value', 'does not match'],
  ['parameters a string', { tools: [{ type: 'function', name: 'f', parameters: 'x' }] }, 'tools[0].parameters', 'invalid_type', 'expected an object'],
  ['parameters a boolean', { tools: [{ type: 'function', name: 'f', parameters: true }] }, 'tools[0].parameters', 'invalid_type', 'expected an object'],
  ['strict a string', { tools: [{ type: 'function', name: 'f', strict: 'yes' }] }, 'tools[0].strict', 'invalid_type', 'expected a boolean'],
  ['description a number', { tools: [{ type: 'function', name: 'f', description: 1 }] }, 'tools[0].description', 'invalid_type', 'expected a string'],
  ['a deferred tool', { tools: [{ type: 'function', name: 'f', defer_loading: true }] }, 'tools[0].defer_loading', 'unsupported_parameter', 'no tool search'],
  ['a function name used twice', { tools: [fn('f'), fn('f')] }, 'tools[1].name', 'invalid_value', "'f' is used twice"],
  ['129 tools', { tools: Array.from({ length: 129 }, (_, i) => fn(`f${i}`)) }, 'tools', 'array_above_max_length', 'maximum length 128'],
  ['tool_choice required without tools', { tool_choice: 'required' }, 'tool_choice', 'invalid_value', "only allowed when 'tools' are specified"],
  ['tool_choice a function not offered', { tools: [fn('f')], tool_choice: { type: 'function', name: 'g' } }, 'tool_choice', 'invalid_value', "no function named 'g'"],
  ['tool_choice a function without tools', { tool_choice: { type: 'function', name: 'f' } }, 'tool_choice', 'invalid_value', "no function named 'f'"],
  ['tool_choice a function without name', { tools: [fn('f')], tool_choice: { type: 'function' } }, 'tool_choice.name', 'missing_required_parameter', "'tool_choice.name'"],
  ['tool_choice allowed_tools', { tools: [fn('f')], tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'f' }] } }, 'tool_choice.type', 'unsupported_parameter', "'allowed_tools'"],
  ['tool_choice a hosted tool', { tool_choice: { type: 'web_search_preview' } }, 'tool_choice.type', 'unsupported_parameter', 'no built-in tools'],
  ['tool_choice without type', { tool_choice: {} }, 'tool_choice.type', 'missing_required_parameter', "'tool_choice.type'"],
  ['tool_choice an unknown string', { tools: [fn('f')], tool_choice: 'always' }, 'tool_choice', 'invalid_value', "'always' is not supported"],
  ['tool_choice a number', { tool_choice: 1 }, 'tool_choice', 'invalid_type', 'one of a string or an object'],
  ['json_schema without name', { text: { format: { type: 'json_schema', schema: {} } } }, 'text.format.name', 'missing_required_parameter', "'text.format.name'"],
  ['json_schema without schema', { text: { format: { type: 'json_schema', name: 'x' } } }, 'text.format.schema', 'missing_required_parameter', "'text.format.schema'"],
  ['json_schema schema an array', { text: { format: { type: 'json_schema', name: 'x', schema: [] } } }, 'text.format.schema', 'invalid_type', 'expected an object, but got an array'],
  ['json_schema strict a string', { text: { format: { type: 'json_schema', name: 'x', schema: {}, strict: 'yes' } } }, 'text.format.strict', 'invalid_type', 'expected a boolean'],
  ['json_schema name with a dot', { text: { format: { type: 'json_schema', name: 'a.b', schema: {} } } }, 'text.format.name', 'invalid_value', 'does not match'],
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
