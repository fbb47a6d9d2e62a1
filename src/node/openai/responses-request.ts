/**
 * `POST /v1/responses` bodies → the same internal chat request `/v1/chat/completions` builds
 * (`ChatRequest`: messages through the model's chat template, tools, response format,
 * sampling, stream), plus what the `Response` object echoes back:
 *
 * - `input`: a string or items — messages, `function_call` and `function_call_output` items,
 *   translated to chat turns (`responses-input.ts`); `instructions` becomes a leading system
 *   message.
 * - Function `tools`, `tool_choice`, `parallel_tool_calls` and `text.format` (`text`,
 *   `json_object`, `json_schema`) become chat's tools and `response_format`
 *   (`responses-tools.ts`), so the same grammar constrains the answer.
 * - `max_output_tokens`, `temperature`, `top_p` (and the vLLM extensions chat takes: `seed`,
 *   `top_k`, `min_p`, `repetition_penalty`, presence / frequency penalties), `stream`,
 *   `include: ['message.output_text.logprobs']` with `top_logprobs`.
 * - Accepted and ignored (clients send them by default): `store`, `metadata` (echoed),
 *   `include` (other values), `truncation`, `user`, `service_tier`, `safety_identifier`,
 *   `prompt_cache_key`, `stream_options`, `max_tool_calls`, `text.verbosity`, `reasoning` when
 *   null or empty.
 * - Refused with a 400 naming them: built-in tools (web_search, file_search, computer_use, …)
 *   and hosted tool choices, `allowed_tools`, images, files, audio, `previous_response_id`,
 *   `conversation`, `background`, `prompt`, `context_management`, reasoning settings, and item
 *   types other than the three above (`item_reference`, reasoning, built-in tool calls).
 *
 * Every refusal is an ApiError 400 in OpenAI's shape whose `param` is the field's path.
 */
import { type ApiError, invalidRequest } from './errors.ts';
import { BodyFields, booleanValue, invalidValue, isRecord, shown, stringValue, typeError, unsupported } from './request-fields.ts';
import { type ChatRequest, MAX_CHAT_TOP_LOGPROBS, readBody, type RequestDefaults, samplingFields, speculateField } from './requests.ts';
import { type ResponseEcho, parseEchoedFields } from './responses-echo.ts';
import { parseInput } from './responses-input.ts';
import { parseResponsesTools, parseTextFormat } from './responses-tools.ts';

/** A parsed Responses request: the chat request to run, and the fields the answer echoes. */
export interface ResponsesRequest {
  readonly chat: ChatRequest;
  readonly echo: ResponseEcho;
}

/** What `include` must hold for output_text logprobs. */
export const INCLUDE_LOGPROBS = 'message.output_text.logprobs';
/** OpenAI's IncludeEnum: known values are accepted (only logprobs has an effect here). */
const INCLUDE_VALUES = new Set([
  'file_search_call.results',
  'web_search_call.results',
  'web_search_call.action.sources',
  'message.input_image.image_url',
  'computer_call_output.output.image_url',
  'code_interpreter_call.outputs',
  'reasoning.encrypted_content',
  INCLUDE_LOGPROBS,
]);

/** Parses a `/v1/responses` body. Throws ApiError (400, or 404 model_not_found). */
export function parseResponsesRequest(body: unknown, servedModel: string, defaults: RequestDefaults = {}): ResponsesRequest {
  const fields = readBody(body, servedModel);
  refuseUnsupported(fields);
  const instructions = fields.string('instructions');
  const tools = parseResponsesTools(fields);
  const messages = [...(instructions === undefined ? [] : [{ role: 'system' as const, content: instructions }]), ...parseInput(fields.get('input'), defaults.imageRefusal)];
  const text = parseTextFormat(fields.get('text'));
  const include = parseInclude(fields.get('include'));
  const logprobs = include.includes(INCLUDE_LOGPROBS);
  const topLogprobsAsked = fields.integer('top_logprobs', { min: 0, max: MAX_CHAT_TOP_LOGPROBS }) ?? 0;
  const topLogprobs = logprobs ? topLogprobsAsked : 0;
  const maxTokens = fields.integer('max_output_tokens', { min: 1 });
  const stream = fields.boolean('stream') ?? false;
  const streamOptions = fields.get('stream_options');
  if (streamOptions !== undefined && !isRecord(streamOptions)) throw typeError('stream_options', 'an object', streamOptions);
  if (isRecord(streamOptions) && streamOptions.include_obfuscation !== undefined && streamOptions.include_obfuscation !== null) {
    booleanValue('stream_options.include_obfuscation', streamOptions.include_obfuscation);
  }
  const echo = parseEchoedFields(fields, { instructions, maxOutputTokens: maxTokens, topLogprobs: topLogprobsAsked, tools, textFormat: text.echo });
  const chat: ChatRequest = {
    kind: 'chat',
    messages,
    ...(text.format ? { responseFormat: text.format } : {}),
    ...(tools.request ? { tools: tools.request } : {}),
    model: servedModel,
    sampling: { ...samplingFields(fields), ...(maxTokens === undefined ? {} : { maxTokens }), ...(logprobs ? { logprobs, topLogprobs } : {}) },
    stopStrings: [],
    stream,
    includeUsage: false,
    logprobs,
    topLogprobs,
    ...(echo.user === undefined ? {} : { user: echo.user }),
    ...speculateField(fields),
  };
  return { chat, echo };
}

function parseInclude(value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw typeError('include', 'an array of strings', value);
  return value.map((entry: unknown, i) => {
    const name = stringValue(`include[${i}]`, entry);
    if (!INCLUDE_VALUES.has(name)) {
      throw invalidValue(`include[${i}]`, `'${shown(name)}' is not supported. Supported values are: ${[...INCLUDE_VALUES].map((v) => `'${v}'`).join(', ')}.`);
    }
    return name;
  });
}

/** Features that would change the answer and that this server cannot honour. */
function refuseUnsupported(fields: BodyFields): void {
  if (fields.get('previous_response_id') !== undefined) {
    stringValue('previous_response_id', fields.get('previous_response_id'));
    throw unsupported('previous_response_id', 'is not supported: this server stores no responses; send the whole conversation in `input`.');
  }
  if (fields.get('conversation') !== undefined) throw unsupported('conversation', 'is not supported: this server stores no conversations; send the whole conversation in `input`.');
  if (fields.boolean('background') === true) throw unsupported('background', 'is not supported: responses are generated while the request is open.');
  if (fields.get('prompt') !== undefined) throw unsupported('prompt', 'is not supported: this server has no stored prompt templates.');
  if (fields.get('context_management') !== undefined) throw unsupported('context_management', 'is not supported by this server.');
  const reasoning = fields.get('reasoning');
  if (reasoning !== undefined) {
    if (!isRecord(reasoning)) throw typeError('reasoning', 'an object', reasoning);
    for (const [key, setting] of Object.entries(reasoning)) {
      if (setting === null || (key === 'effort' && setting === 'none')) continue;
      throw unsupported(`reasoning.${shown(key)}`, 'is not supported: this model does not reason.');
    }
  }
}
