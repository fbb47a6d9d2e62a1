import { describe, expect, it } from 'vitest';
import { validateSamplingParams } from '../../src/core/sampling/params.ts';
import { ApiError } from '../../src/node/openai/errors.ts';
import {
  type ChatRequest,
  type CompletionRequest,
  parseChatRequest,
  parseCompletionRequest,
} from '../../src/node/openai/requests.ts';

const MODEL = 'stories260k';
const DEFAULTS = { vocabSize: 512 };
const user = [{ role: 'user', content: 'Hi' }];

const chatRequestOf = (extra: Record<string, unknown>): ChatRequest => parseChatRequest({ model: MODEL, messages: user, ...extra }, MODEL, DEFAULTS);
const chat = (extra: Record<string, unknown>) => parseChatRequest({ model: MODEL, messages: user, ...extra }, MODEL, DEFAULTS);
const completion = (extra: Record<string, unknown>) =>
  parseCompletionRequest({ model: MODEL, prompt: 'Once', ...extra }, MODEL, DEFAULTS);

function refusal(run: () => unknown): ApiError {
  try {
    run();
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    return e as ApiError;
  }
  throw new Error('expected a refusal');
}

type Refusal = [name: string, run: () => unknown, param: string | null, code: string | null, message: string];

/** Every refusal: 400 invalid_request_error with this param, code and exact message. */
const refusals: Refusal[] = [
  // body and model
  ['body not an object', () => parseChatRequest([1], MODEL, DEFAULTS), null, 'invalid_type', 'Invalid request body: expected a JSON object, but got an array instead.'],
  ['body null', () => parseCompletionRequest(null, MODEL, DEFAULTS), null, 'invalid_type', 'Invalid request body: expected a JSON object, but got null instead.'],
  ['model missing', () => parseChatRequest({ messages: user }, MODEL, DEFAULTS), 'model', 'missing_required_parameter', "Missing required parameter: 'model'."],
  ['model not a string', () => chat({ model: 3 }), 'model', 'invalid_type', "Invalid type for 'model': expected a string, but got an integer instead."],
  // messages
  ['messages missing', () => parseChatRequest({ model: MODEL }, MODEL, DEFAULTS), 'messages', 'missing_required_parameter', "Missing required parameter: 'messages'."],
  ['messages not an array', () => chat({ messages: 'hi' }), 'messages', 'invalid_type', "Invalid type for 'messages': expected an array, but got a string instead."],
  ['messages empty', () => chat({ messages: [] }), 'messages', 'empty_array', "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."],
  ['message not an object', () => chat({ messages: ['hi'] }), 'messages[0]', 'invalid_type', "Invalid type for 'messages[0]': expected an object, but got a string instead."],
  ['role missing', () => chat({ messages: [{ content: 'x' }] }), 'messages[0].role', 'missing_required_parameter', "Missing required parameter: 'messages[0].role'."],
  ['role not a string', () => chat({ messages: [{ role: 1, content: 'x' }] }), 'messages[0].role', 'invalid_type', "Invalid type for 'messages[0].role': expected a string, but got an integer instead."],
  ['role function', () => chat({ messages: [...user, { role: 'function', content: 'x', name: 'f' }] }), 'messages[1].role', 'invalid_value', "Invalid value for 'messages[1].role': 'function' is not supported. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'."],
  ['tool turn without tool_call_id', () => chat({ messages: [...user, { role: 'tool', content: 'x' }] }), 'messages[1].tool_call_id', 'missing_required_parameter', "Missing required parameter: 'messages[1].tool_call_id'."],
  ['tool_calls without function', () => chat({ messages: [...user, { role: 'assistant', content: 'x', tool_calls: [{ id: 'a' }] }] }), 'messages[1].tool_calls[0].function', 'missing_required_parameter', "Missing required parameter: 'messages[1].tool_calls[0].function'."],
  ['tool_calls arguments not a string', () => chat({ messages: [...user, { role: 'assistant', content: null, tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: {} } }] }] }), 'messages[1].tool_calls[0].function.arguments', 'invalid_type', "Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a string, but got an object instead."],
  ['function_call in a message', () => chat({ messages: [...user, { role: 'assistant', content: 'x', function_call: { name: 'f', arguments: '{}' } }] }), 'messages[1].function_call', 'unsupported_parameter', "Unsupported parameter: 'messages[1].function_call' is deprecated and not supported: send 'tool_calls' instead."],
  ['role constructor (an Object.prototype name)', () => chat({ messages: [{ role: 'constructor', content: 'x' }] }), 'messages[0].role', 'invalid_value', "Invalid value for 'messages[0].role': 'constructor' is not supported. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'."],
  ['content missing', () => chat({ messages: [{ role: 'assistant', content: null }] }), 'messages[0].content', 'missing_required_parameter', "Missing required parameter: 'messages[0].content'."],
  ['content a number', () => chat({ messages: [{ role: 'user', content: 4.5 }] }), 'messages[0].content', 'invalid_type', "Invalid type for 'messages[0].content': expected one of a string or an array of objects, but got a decimal instead."],
  ['content parts empty', () => chat({ messages: [{ role: 'user', content: [] }] }), 'messages[0].content', 'empty_array', "Invalid 'messages[0].content': empty array. Expected an array with minimum length 1, but got an empty array instead."],
  ['content part not an object', () => chat({ messages: [{ role: 'user', content: ['x'] }] }), 'messages[0].content[0]', 'invalid_type', "Invalid type for 'messages[0].content[0]': expected an object, but got a string instead."],
  ['content part image', () => chat({ messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'image_url', image_url: { url: 'x' } }] }] }), 'messages[0].content[1].type', 'invalid_value', "Invalid value for 'messages[0].content[1].type': 'image_url' is not supported. Supported values are: 'text' (this model reads text only)."],
  ['content part type missing', () => chat({ messages: [{ role: 'user', content: [{ text: 'a' }] }] }), 'messages[0].content[0].type', 'missing_required_parameter', "Missing required parameter: 'messages[0].content[0].type'."],
  ['content part text missing', () => chat({ messages: [{ role: 'user', content: [{ type: 'text' }] }] }), 'messages[0].content[0].text', 'missing_required_parameter', "Missing required parameter: 'messages[0].content[0].text'."],
  ['content part text not a string', () => chat({ messages: [{ role: 'user', content: [{ type: 'text', text: 1 }] }] }), 'messages[0].content[0].text', 'invalid_type', "Invalid type for 'messages[0].content[0].text': expected a string, but got an integer instead."],
  // prompt
  ['prompt missing', () => parseCompletionRequest({ model: MODEL }, MODEL, DEFAULTS), 'prompt', 'missing_required_parameter', "Missing required parameter: 'prompt'."],
  ['prompt a number', () => completion({ prompt: 5 }), 'prompt', 'invalid_type', "Invalid type for 'prompt': expected one of a string, an array of strings, an array of integers, or an array of arrays of integers, but got an integer instead."],
  ['prompt empty array', () => completion({ prompt: [] }), 'prompt', 'empty_array', "Invalid 'prompt': empty array. Expected an array with minimum length 1, but got an empty array instead."],
  ['several prompts', () => completion({ prompt: ['a', 'b', 'c'] }), 'prompt', 'unsupported_value', "Invalid 'prompt': this server completes one prompt per request, but got 3 prompts. Send each prompt as its own request."],
  ['several token lists', () => completion({ prompt: [[1], [2]] }), 'prompt', 'unsupported_value', "Invalid 'prompt': this server completes one prompt per request, but got 2 prompts. Send each prompt as its own request."],
  ['mixed prompt', () => completion({ prompt: ['a', 1] }), 'prompt', 'invalid_type', "Invalid type for 'prompt': expected one of a string, an array of strings, an array of integers, or an array of arrays of integers, but got an array instead."],
  ['negative token id', () => completion({ prompt: [1, -2] }), 'prompt[1]', 'integer_below_min_value', "Invalid 'prompt[1]': integer below minimum value. Expected a value >= 0, but got -2 instead."],
  ['fractional token id', () => completion({ prompt: [1.5] }), 'prompt[0]', 'invalid_type', "Invalid type for 'prompt[0]': expected an integer, but got a decimal instead."],
  ['token id beyond vocab', () => completion({ prompt: [1, 512] }), 'prompt[1]', 'integer_above_max_value', "Invalid 'prompt[1]': integer above maximum value. Expected a value <= 511, but got 512 instead."],
  ['empty inner token list', () => completion({ prompt: [[]] }), 'prompt[0]', 'empty_array', "Invalid 'prompt[0]': empty array. Expected an array with minimum length 1, but got an empty array instead."],
  ['inner list of strings', () => completion({ prompt: [['a']] }), 'prompt[0]', 'invalid_type', "Invalid type for 'prompt[0]': expected an array of integers, but got an array instead."],
  // max tokens
  ['max_tokens zero', () => chat({ max_tokens: 0 }), 'max_tokens', 'integer_below_min_value', "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got 0 instead."],
  ['max_tokens a string', () => completion({ max_tokens: '16' }), 'max_tokens', 'invalid_type', "Invalid type for 'max_tokens': expected an integer, but got a string instead."],
  ['max_completion_tokens decimal', () => chat({ max_completion_tokens: 1.5 }), 'max_completion_tokens', 'invalid_type', "Invalid type for 'max_completion_tokens': expected an integer, but got a decimal instead."],
  // sampling
  ['temperature a string', () => chat({ temperature: '0.5' }), 'temperature', 'invalid_type', "Invalid type for 'temperature': expected a number, but got a string instead."],
  ['temperature above 2', () => chat({ temperature: 3 }), 'temperature', 'decimal_above_max_value', "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead."],
  ['temperature below 0', () => completion({ temperature: -0.1 }), 'temperature', 'decimal_below_min_value', "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -0.1 instead."],
  ['top_p zero', () => chat({ top_p: 0 }), 'top_p', 'decimal_below_min_value', "Invalid 'top_p': decimal below minimum value. Expected a value > 0, but got 0 instead."],
  ['top_p above 1', () => chat({ top_p: 1.5 }), 'top_p', 'decimal_above_max_value', "Invalid 'top_p': decimal above maximum value. Expected a value <= 1, but got 1.5 instead."],
  ['seed decimal', () => chat({ seed: 1.5 }), 'seed', 'invalid_type', "Invalid type for 'seed': expected an integer, but got a decimal instead."],
  ['seed unsafe', () => chat({ seed: 2 ** 60 }), 'seed', 'integer_above_max_value', "Invalid 'seed': integer above maximum value. Expected a value <= 9007199254740991, but got 1152921504606847000 instead."],
  ['presence_penalty', () => chat({ presence_penalty: 2.5 }), 'presence_penalty', 'decimal_above_max_value', "Invalid 'presence_penalty': decimal above maximum value. Expected a value <= 2, but got 2.5 instead."],
  ['frequency_penalty', () => completion({ frequency_penalty: -3 }), 'frequency_penalty', 'decimal_below_min_value', "Invalid 'frequency_penalty': decimal below minimum value. Expected a value >= -2, but got -3 instead."],
  ['top_k', () => chat({ top_k: -2 }), 'top_k', 'integer_below_min_value', "Invalid 'top_k': integer below minimum value. Expected a value >= -1, but got -2 instead."],
  ['min_p', () => chat({ min_p: 2 }), 'min_p', 'decimal_above_max_value', "Invalid 'min_p': decimal above maximum value. Expected a value <= 1, but got 2 instead."],
  ['repetition_penalty', () => chat({ repetition_penalty: 0 }), 'repetition_penalty', 'decimal_below_min_value', "Invalid 'repetition_penalty': decimal below minimum value. Expected a value > 0, but got 0 instead."],
  // stop
  ['stop a number', () => chat({ stop: 1 }), 'stop', 'invalid_type', "Invalid type for 'stop': expected one of a string or an array of strings, but got an integer instead."],
  ['stop too many', () => chat({ stop: ['a', 'b', 'c', 'd', 'e'] }), 'stop', 'array_above_max_length', "Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length 5 instead."],
  ['stop empty string', () => chat({ stop: '' }), 'stop', 'invalid_value', "Invalid value for 'stop': stop strings must not be empty."],
  ['stop empty element', () => completion({ stop: ['a', ''] }), 'stop[1]', 'invalid_value', "Invalid value for 'stop[1]': stop strings must not be empty."],
  ['stop element not a string', () => completion({ stop: ['a', 2] }), 'stop[1]', 'invalid_type', "Invalid type for 'stop[1]': expected a string, but got an integer instead."],
  // logprobs
  ['chat logprobs an integer', () => chat({ logprobs: 3 }), 'logprobs', 'invalid_type', "Invalid type for 'logprobs': expected a boolean, but got an integer instead."],
  ['top_logprobs without logprobs', () => chat({ top_logprobs: 2 }), 'top_logprobs', 'invalid_value', "Invalid value for 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used."],
  ['top_logprobs above 20', () => chat({ logprobs: true, top_logprobs: 21 }), 'top_logprobs', 'integer_above_max_value', "Invalid 'top_logprobs': integer above maximum value. Expected a value <= 20, but got 21 instead."],
  ['completion logprobs a boolean', () => completion({ logprobs: true }), 'logprobs', 'invalid_type', "Invalid type for 'logprobs': expected an integer, but got a boolean instead."],
  ['completion logprobs above 5', () => completion({ logprobs: 6 }), 'logprobs', 'integer_above_max_value', "Invalid 'logprobs': integer above maximum value. Expected a value <= 5, but got 6 instead."],
  // stream
  ['stream a string', () => chat({ stream: 'true' }), 'stream', 'invalid_type', "Invalid type for 'stream': expected a boolean, but got a string instead."],
  ['stream_options without stream', () => chat({ stream_options: { include_usage: true } }), 'stream_options', 'invalid_value', "The 'stream_options' parameter is only allowed when 'stream' is enabled."],
  ['stream_options not an object', () => chat({ stream: true, stream_options: true }), 'stream_options', 'invalid_type', "Invalid type for 'stream_options': expected an object, but got a boolean instead."],
  ['include_usage not a boolean', () => completion({ stream: true, stream_options: { include_usage: 1 } }), 'stream_options.include_usage', 'invalid_type', "Invalid type for 'stream_options.include_usage': expected a boolean, but got an integer instead."],
  // n, user
  ['n above 1', () => chat({ n: 3 }), 'n', 'unsupported_value', "Invalid 'n': this server generates one choice per request, but got n=3. Send 3 requests instead."],
  ['n zero', () => completion({ n: 0 }), 'n', 'integer_below_min_value', "Invalid 'n': integer below minimum value. Expected a value >= 1, but got 0 instead."],
  ['user not a string', () => chat({ user: 42 }), 'user', 'invalid_type', "Invalid type for 'user': expected a string, but got an integer instead."],
  // features this server cannot honour
  ['tools not an array', () => chat({ tools: { type: 'function' } }), 'tools', 'invalid_type', "Invalid type for 'tools': expected an array, but got an object instead."],
  ['built-in tool', () => chat({ tools: [{ type: 'web_search' }] }), 'tools[0].type', 'invalid_value', "Invalid value for 'tools[0].type': 'web_search' is not supported. Supported values are: 'function' (built-in tools are not available)."],
  ['tool name pattern', () => chat({ tools: [{ type: 'function', function: { name: 'a b' } }] }), 'tools[0].function.name', 'invalid_value', "Invalid value for 'tools[0].function.name': 'a b' does not match '^[a-zA-Z0-9_-]{1,64}$'."],
  ['tool parameters of a string', () => chat({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string' } } }] }), 'tools[0].function.parameters', 'invalid_function_parameters', 'Invalid schema for function \'f\': schema must be a JSON Schema of \'type: "object"\', got \'type: "string"\'.'],
  ['tool parameters false', () => chat({ tools: [{ type: 'function', function: { name: 'f', parameters: false } }] }), 'tools[0].function.parameters', 'invalid_function_parameters', 'Invalid schema for function \'f\': schema must be a JSON Schema of \'type: "object"\', got \'false\'.'],
  ['a tool turn with no tool_calls before it', () => chat({ messages: [...user, { role: 'tool', tool_call_id: 'call_1', content: 'x' }] }), 'messages[1].role', null, "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."],
  ['a tool turn after an assistant turn without calls', () => chat({ messages: [...user, { role: 'assistant', content: 'hi' }, { role: 'tool', tool_call_id: 'call_1', content: 'x' }] }), 'messages[2].role', null, "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."],
  ['a tool turn after the user spoke again', () => chat({ messages: [...user, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] }, { role: 'tool', tool_call_id: 'c', content: 'x' }, ...user, { role: 'tool', tool_call_id: 'c', content: 'y' }] }), 'messages[4].role', null, "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."],
  ['tool parameters not an object', () => chat({ tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] }), 'tools[0].function.parameters', 'invalid_type', "Invalid type for 'tools[0].function.parameters': expected an object, but got a string instead."],
  ['duplicate tool names', () => chat({ tools: [{ type: 'function', function: { name: 'f' } }, { type: 'function', function: { name: 'f' } }] }), 'tools[1].function.name', 'invalid_value', "Invalid value for 'tools[1].function.name': the function name 'f' is used twice."],
  ['tool_choice names an unknown function', () => chat({ tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'g' } } }), 'tool_choice', 'invalid_value', "Invalid value for 'tool_choice': no function named 'g' was specified in the 'tools' parameter."],
  ['tool_choice unknown string', () => chat({ tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'always' }), 'tool_choice', 'invalid_value', "Invalid value for 'tool_choice': 'always' is not supported. Supported values are: 'none', 'auto', 'required', or an object naming a function."],
  ['parallel_tool_calls a string', () => chat({ tools: [{ type: 'function', function: { name: 'f' } }], parallel_tool_calls: 'yes' }), 'parallel_tool_calls', 'invalid_type', "Invalid type for 'parallel_tool_calls': expected a boolean, but got a string instead."],
  ['functions', () => chat({ functions: [{ name: 'f' }] }), 'functions', 'unsupported_parameter', "Unsupported parameter: 'functions' is deprecated and not supported: send 'tools' instead."],
  ['tool_choice required without tools', () => chat({ tool_choice: 'required' }), 'tool_choice', 'invalid_value', "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."],
  ['response_format unknown type', () => chat({ response_format: { type: 'xml' } }), 'response_format.type', 'invalid_value', "Invalid value for 'response_format.type': 'xml' is not supported. Supported values are: 'text', 'json_object' and 'json_schema'."],
  ['json_schema without a name', () => chat({ response_format: { type: 'json_schema', json_schema: { schema: {} } } }), 'response_format.json_schema.name', 'missing_required_parameter', "Missing required parameter: 'response_format.json_schema.name'."],
  ['json_schema schema not an object', () => chat({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: [] } } }), 'response_format.json_schema.schema', 'invalid_type', "Invalid type for 'response_format.json_schema.schema': expected an object, but got an array instead."],
  ['modalities with audio', () => chat({ modalities: ['text', 'audio'] }), 'modalities', 'unsupported_value', "Unsupported value: 'modalities' does not support 'audio' with this model. Supported values are: 'text'."],
  ['modalities not an array', () => chat({ modalities: 'text' }), 'modalities', 'invalid_type', "Invalid type for 'modalities': expected an array of strings, but got a string instead."],
  ['modalities holding a number', () => chat({ modalities: [1] }), 'modalities[0]', 'invalid_type', "Invalid type for 'modalities[0]': expected a string, but got an integer instead."],
  ['audio output', () => chat({ audio: { voice: 'alloy', format: 'mp3' } }), 'audio', 'unsupported_parameter', "Unsupported parameter: 'audio' is not supported: this model answers in text only."],
  ['logit_bias', () => completion({ logit_bias: { '50256': -100 } }), 'logit_bias', 'unsupported_parameter', "Unsupported parameter: 'logit_bias' is not supported by this server."],
  ['echo', () => completion({ echo: true }), 'echo', 'unsupported_parameter', "Unsupported parameter: 'echo' is not supported by this server."],
  ['best_of', () => completion({ best_of: 2 }), 'best_of', 'unsupported_parameter', "Unsupported parameter: 'best_of' is not supported: this server generates one choice per request."],
  ['suffix', () => completion({ suffix: 'end' }), 'suffix', 'unsupported_parameter', "Unsupported parameter: 'suffix' is not supported by this server."],
];

describe('refusals', () => {
  it.each(refusals)('%s', (_name, run, param, code, message) => {
    const err = refusal(run);
    expect(err.status).toBe(400);
    expect(err.type).toBe('invalid_request_error');
    expect(err.param).toBe(param);
    expect(err.code).toBe(code);
    expect(err.message).toBe(message);
  });

  it('refuses another model with 404 model_not_found', () => {
    for (const run of [() => chat({ model: 'gpt-4o' }), () => completion({ model: 'gpt-4o' })]) {
      const err = refusal(run);
      expect(err.status).toBe(404);
      expect(err.type).toBe('invalid_request_error');
      expect(err.code).toBe('model_not_found');
      expect(err.message).toBe("The model 'gpt-4o' does not exist or you do not have access to it.");
    }
  });

  it('checks the model before anything else', () => {
    expect(refusal(() => parseChatRequest({ model: 'other', messages: [] }, MODEL, DEFAULTS)).status).toBe(404);
  });
});

describe('parseChatRequest', () => {
  it('gives defaults for a minimal body', () => {
    const req = chat({});
    expect(req).toStrictEqual({
      kind: 'chat',
      messages: [{ role: 'user', content: 'Hi' }],
      model: MODEL,
      sampling: {},
      stopStrings: [],
      stream: false,
      includeUsage: false,
      logprobs: false,
      topLogprobs: 0,
    } satisfies ChatRequest);
  });

  it('maps every supported field', () => {
    const req = chat({
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'developer', content: 'Really.' },
        { role: 'user', content: [{ type: 'text', text: 'Hello' }, { type: 'text', text: 'there' }], name: 'ann' },
        { role: 'assistant', content: 'Hi', tool_calls: [] },
        { role: 'user', content: 'Again' },
      ],
      max_completion_tokens: 20,
      max_tokens: 99,
      temperature: 0.7,
      top_p: 0.9,
      seed: 7,
      stop: ['\n', 'END'],
      presence_penalty: 0.5,
      frequency_penalty: -0.5,
      top_k: 40,
      min_p: 0.05,
      repetition_penalty: 1.1,
      logprobs: true,
      top_logprobs: 3,
      stream: true,
      stream_options: { include_usage: true },
      n: 1,
      user: 'u-1',
      tool_choice: 'none',
      response_format: { type: 'text' },
      modalities: ['text'],
      audio: null,
      logit_bias: {},
      metadata: { anything: 1 },
      store: false,
    });
    expect(req.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'system', content: 'Really.' },
      { role: 'user', content: 'Hello\nthere' },
      { role: 'assistant', content: 'Hi' },
      { role: 'user', content: 'Again' },
    ]);
    expect(req.sampling).toStrictEqual({
      temperature: 0.7,
      topP: 0.9,
      presencePenalty: 0.5,
      frequencyPenalty: -0.5,
      seed: 7,
      topK: 40,
      minP: 0.05,
      repetitionPenalty: 1.1,
      maxTokens: 20,
      logprobs: true,
      topLogprobs: 3,
    });
    expect(req.stopStrings).toEqual(['\n', 'END']);
    expect(req.stream).toBe(true);
    expect(req.includeUsage).toBe(true);
    expect(req.logprobs).toBe(true);
    expect(req.topLogprobs).toBe(3);
    expect(req.user).toBe('u-1');
    // What the parser returns is valid for the sampler.
    expect(() => validateSamplingParams(req.sampling)).not.toThrow();
  });

  it('uses max_tokens when max_completion_tokens is absent', () => {
    expect(chat({ max_tokens: 9 }).sampling.maxTokens).toBe(9);
    expect(chat({ max_tokens: 9, max_completion_tokens: null }).sampling.maxTokens).toBe(9);
  });

  it('treats null as absent and ignores unknown fields', () => {
    const req = chat({ temperature: null, stop: null, logprobs: null, stream_options: null, n: null, user: null, whatever: [1] });
    expect(req.sampling).toStrictEqual({});
    expect(req.stopStrings).toEqual([]);
    expect(req.user).toBeUndefined();
  });

  it('accepts a single stop string, logprobs without alternatives, and top_k -1', () => {
    const req = chat({ stop: 'END', logprobs: true, top_k: -1 });
    expect(req.stopStrings).toEqual(['END']);
    expect(req.sampling).toMatchObject({ logprobs: true, topLogprobs: 0, topK: 0 });
  });

  it('accepts include_usage false and a stream without options', () => {
    expect(chat({ stream: true }).includeUsage).toBe(false);
    expect(chat({ stream: true, stream_options: {} }).includeUsage).toBe(false);
    expect(chat({ stream: true, stream_options: { include_usage: false } }).includeUsage).toBe(false);
  });
});

describe('parseCompletionRequest', () => {
  it('gives defaults for a minimal body', () => {
    expect(completion({})).toStrictEqual({
      kind: 'completion',
      prompt: 'Once',
      model: MODEL,
      sampling: {},
      stopStrings: [],
      stream: false,
      includeUsage: false,
      logprobs: false,
      topLogprobs: 0,
    } satisfies CompletionRequest);
  });

  it.each([
    ['a string', 'Once upon', 'Once upon'],
    ['an empty string', '', ''],
    ['token ids', [1, 2, 511], [1, 2, 511]],
    ['one string in an array', ['Once upon'], 'Once upon'],
    ['one token list in an array', [[1, 2]], [1, 2]],
  ])('accepts %s', (_name, prompt, expected) => {
    expect(completion({ prompt }).prompt).toEqual(expected);
  });

  it('accepts any non-negative token id when the vocabulary size is unknown', () => {
    expect(parseCompletionRequest({ model: MODEL, prompt: [100000] }, MODEL, {}).prompt).toEqual([100000]);
  });

  it('maps logprobs N to logprobs plus N alternatives', () => {
    expect(completion({ logprobs: 0 })).toMatchObject({ logprobs: true, topLogprobs: 0, sampling: { logprobs: true, topLogprobs: 0 } });
    expect(completion({ logprobs: 5 })).toMatchObject({ logprobs: true, topLogprobs: 5, sampling: { logprobs: true, topLogprobs: 5 } });
    expect(completion({ logprobs: null })).toMatchObject({ logprobs: false, topLogprobs: 0 });
  });

  it('reads max_tokens, sampling, stop and stream fields', () => {
    const req = completion({
      max_tokens: 16,
      temperature: 0,
      top_p: 1,
      seed: -3,
      stop: ['x'],
      stream: true,
      stream_options: { include_usage: true },
      echo: false,
      best_of: 1,
      suffix: '',
      max_completion_tokens: 'ignored: not a completions field',
    });
    expect(req.sampling).toStrictEqual({ temperature: 0, topP: 1, seed: -3, maxTokens: 16 });
    expect(req.stopStrings).toEqual(['x']);
    expect(req.includeUsage).toBe(true);
  });
});

describe('structured output and tools', () => {
  it('parses response_format, tools, tool_choice and parallel_tool_calls', () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'd', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: true } }];
    const req = chatRequestOf({ tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, parallel_tool_calls: false, response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object' }, strict: true } } });
    expect(req.tools).toEqual({ tools: [{ name: 'get_weather', description: 'd', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: true }], choice: { type: 'function', name: 'get_weather' }, parallel: false });
    expect(req.responseFormat).toEqual({ type: 'json_schema', name: 'answer', schema: { type: 'object' }, strict: true });
    expect(chatRequestOf({ tools }).tools?.choice).toEqual({ type: 'auto' });
    expect(chatRequestOf({ response_format: { type: 'text' } }).responseFormat).toBeUndefined();
    expect(chatRequestOf({ tools: [] }).tools).toBeUndefined();
  });

  it('accepts a tool loop history: assistant tool_calls with null content, then tool results', () => {
    const req = chatRequestOf({
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: [{ type: 'text', text: 'done' }] },
      ],
    });
    expect(req.messages.slice(1)).toEqual([
      { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'f', arguments: '{"a":1}' }] },
      { role: 'tool', content: 'done', toolCallId: 'call_1' },
    ]);
  });
});
