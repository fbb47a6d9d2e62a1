/**
 * `POST /v1/responses` bodies → the same internal chat request `/v1/chat/completions` builds
 * (`ChatRequest`: messages through the model's chat template, sampling, stream), plus what the
 * `Response` object echoes back. Text in, text out:
 *
 * - `input`: a string (one user message) or message items (`{ role, content }`, `type:
 *   'message'` optional) with roles user / system / developer (as system) / assistant, content
 *   a string or `input_text` / `output_text` parts (joined with a newline, as chat parts are);
 *   `instructions` becomes a leading system message.
 * - `max_output_tokens`, `temperature`, `top_p` (and the vLLM extensions chat takes: `seed`,
 *   `top_k`, `min_p`, `repetition_penalty`, presence / frequency penalties), `stream`,
 *   `include: ['message.output_text.logprobs']` with `top_logprobs`.
 * - Accepted and ignored (clients send them by default): `store`, `metadata` (echoed),
 *   `include` (other values), `truncation`, `user`, `parallel_tool_calls`, `service_tier`,
 *   `safety_identifier`, `prompt_cache_key`, `stream_options`, `max_tool_calls`,
 *   `text.verbosity`, `reasoning` when null or empty, `tools: []`, `tool_choice` none / auto.
 * - Refused with a 400 naming them: built-in tools (web_search, file_search, computer_use, …),
 *   images, files, audio, `previous_response_id`, `conversation`, `background`, `prompt`,
 *   `context_management`, reasoning settings, and any item type but messages. Function tools
 *   (`tools`, `function_call` / `function_call_output` items) and JSON output (`text.format`
 *   json_object / json_schema) are refused until the chat request carries tools and response
 *   formats; they then map onto those same fields (see `refuseUntilToolsLand`).
 *
 * Every refusal is an ApiError 400 in OpenAI's shape whose `param` is the field's path.
 */
import type { ChatMessage } from '../../core/model/tokenizer.ts';
import { type ApiError, invalidRequest } from './errors.ts';
import { BodyFields, booleanValue, invalidValue, isRecord, missingParam, stringValue, typeError } from './request-fields.ts';
import { type ChatRequest, MAX_CHAT_TOP_LOGPROBS, readBody, type RequestDefaults, samplingFields } from './requests.ts';
import { type ResponseEcho, parseEchoedFields } from './responses-echo.ts';

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

const ROLES: Readonly<Record<string, ChatMessage['role']>> = { user: 'user', system: 'system', developer: 'system', assistant: 'assistant' };
const PART_SEPARATOR = '\n';

/** Item types of the Responses API that belong to built-in tools or stored state. */
const BUILT_IN_ITEMS = new Set([
  'file_search_call',
  'web_search_call',
  'computer_call',
  'computer_call_output',
  'image_generation_call',
  'code_interpreter_call',
  'local_shell_call',
  'local_shell_call_output',
  'shell_call',
  'shell_call_output',
  'apply_patch_call',
  'apply_patch_call_output',
  'mcp_list_tools',
  'mcp_approval_request',
  'mcp_approval_response',
  'mcp_call',
  'custom_tool_call',
  'custom_tool_call_output',
  'tool_search_call',
  'tool_search_output',
]);

function unsupported(param: string, why: string): ApiError {
  return invalidRequest(`Unsupported parameter: '${param}' ${why}`, param, 'unsupported_parameter');
}

function emptyArray(param: string): ApiError {
  return invalidRequest(`Invalid '${param}': empty array. Expected an array with minimum length 1, but got an empty array instead.`, param, 'empty_array');
}

/** A type name from the client, shortened for an error message. */
const shown = (name: string) => (name.length > 64 ? `${name.slice(0, 64)}…` : name);

/** Parses a `/v1/responses` body. Throws ApiError (400, or 404 model_not_found). */
export function parseResponsesRequest(body: unknown, servedModel: string, defaults: RequestDefaults): ResponsesRequest {
  const fields = readBody(body, servedModel);
  refuseUnsupported(fields);
  refuseUntilToolsLand(fields);
  const instructions = fields.string('instructions');
  const messages = [...(instructions === undefined ? [] : [{ role: 'system' as const, content: instructions }]), ...parseInput(fields.get('input'))];
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
  const echo = parseEchoedFields(fields, { instructions, maxOutputTokens: maxTokens, topLogprobs: topLogprobsAsked });
  const chat: ChatRequest = {
    kind: 'chat',
    messages,
    model: servedModel,
    sampling: { ...samplingFields(fields), maxTokens: maxTokens ?? defaults.maxTokens, ...(logprobs ? { logprobs, topLogprobs } : {}) },
    maxTokensRequested: maxTokens !== undefined,
    stopStrings: [],
    stream,
    includeUsage: false,
    logprobs,
    topLogprobs,
    ...(echo.user === undefined ? {} : { user: echo.user }),
  };
  return { chat, echo };
}

/** `input`: a string, or a non-empty array of message items. */
function parseInput(value: unknown): ChatMessage[] {
  if (value === undefined) throw missingParam('input');
  if (typeof value === 'string') return [{ role: 'user', content: value }];
  if (!Array.isArray(value)) throw typeError('input', 'one of a string or an array of input items', value);
  if (value.length === 0) throw emptyArray('input');
  return value.map((item: unknown, i) => parseItem(item, `input[${i}]`));
}

function parseItem(item: unknown, path: string): ChatMessage {
  if (!isRecord(item)) throw typeError(path, 'an object', item);
  const type = item.type === undefined || item.type === null ? 'message' : stringValue(`${path}.type`, item.type);
  if (type !== 'message') throw refusedItem(type, `${path}.type`);
  if (item.role === undefined || item.role === null) throw missingParam(`${path}.role`);
  const roleName = stringValue(`${path}.role`, item.role);
  const role = Object.hasOwn(ROLES, roleName) ? ROLES[roleName] : undefined; // not `constructor` & co.
  if (role === undefined) {
    throw invalidValue(`${path}.role`, `'${shown(roleName)}' is not supported. Supported values are: 'user', 'system', 'developer', and 'assistant'.`);
  }
  return { role, content: parseContent(item.content, `${path}.content`) };
}

function refusedItem(type: string, param: string): ApiError {
  if (type === 'function_call' || type === 'function_call_output') {
    return unsupported(param, `'${type}' items are not supported yet: this server does not offer function tools on /v1/responses.`);
  }
  if (type === 'item_reference') return unsupported(param, "'item_reference' items are not supported: this server stores no responses; send the items themselves.");
  if (type === 'reasoning') return unsupported(param, "'reasoning' items are not supported: this model does not reason.");
  if (BUILT_IN_ITEMS.has(type)) return unsupported(param, `'${type}' items are not supported: this server offers no built-in tools.`);
  return invalidValue(param, `'${shown(type)}' is not supported. Supported values are: 'message'.`);
}

function parseContent(value: unknown, path: string): string {
  if (value === undefined || value === null) throw missingParam(path);
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) throw typeError(path, 'one of a string or an array of content parts', value);
  if (value.length === 0) throw emptyArray(path);
  return value
    .map((part: unknown, j) => {
      const partPath = `${path}[${j}]`;
      if (!isRecord(part)) throw typeError(partPath, 'an object', part);
      if (part.type === undefined || part.type === null) throw missingParam(`${partPath}.type`);
      const type = stringValue(`${partPath}.type`, part.type);
      if (type === 'input_text' || type === 'output_text') {
        if (part.text === undefined || part.text === null) throw missingParam(`${partPath}.text`);
        return stringValue(`${partPath}.text`, part.text);
      }
      const media: Record<string, string> = { input_image: 'images', input_file: 'files', input_audio: 'audio' };
      if (Object.hasOwn(media, type)) return unsupportedPart(partPath, type, media[type]);
      if (type === 'refusal') return unsupportedPart(partPath, type, 'refusal parts');
      throw invalidValue(`${partPath}.type`, `'${shown(type)}' is not supported. Supported values are: 'input_text' and 'output_text'.`);
    })
    .join(PART_SEPARATOR);
}

function unsupportedPart(path: string, type: string, what: string): never {
  throw unsupported(`${path}.type`, `'${type}' is not supported: this model reads text only (no ${what}).`);
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
  const tools = fields.get('tools');
  if (tools !== undefined && !Array.isArray(tools)) throw typeError('tools', 'an array', tools);
  (tools as unknown[] | undefined)?.forEach((tool: unknown, i) => {
    if (!isRecord(tool)) throw typeError(`tools[${i}]`, 'an object', tool);
    if (tool.type === undefined || tool.type === null) throw missingParam(`tools[${i}].type`);
    const type = stringValue(`tools[${i}].type`, tool.type);
    if (type !== 'function') throw unsupported(`tools[${i}].type`, `'${shown(type)}' is not supported: this server offers no built-in tools (web search, file search, computer use, code interpreter, image generation, MCP, shell).`);
  });
}

/**
 * Function tools, `tool_choice` beyond none / auto and JSON output formats. The Responses
 * translation maps them onto the chat request's own fields once those exist: `tools` of type
 * function → chat tools, `text.format` → `response_format`, `function_call` /
 * `function_call_output` items → assistant `tool_calls` / `tool` messages; until then, 400.
 */
function refuseUntilToolsLand(fields: BodyFields): void {
  const tools = fields.get('tools') as unknown[] | undefined;
  if (tools !== undefined && tools.length > 0) throw unsupported('tools', 'with function tools is not supported yet on /v1/responses.');
  const choice = fields.get('tool_choice');
  if (choice !== undefined && choice !== 'none' && choice !== 'auto') {
    if (typeof choice !== 'string' && !isRecord(choice)) throw typeError('tool_choice', 'one of a string or an object', choice);
    throw unsupported('tool_choice', 'is not supported: no tools are available.');
  }
  const text = fields.get('text');
  if (text === undefined) return;
  if (!isRecord(text)) throw typeError('text', 'an object', text);
  const format = text.format;
  if (format !== undefined && format !== null) {
    if (!isRecord(format)) throw typeError('text.format', 'an object', format);
    if (format.type === undefined || format.type === null) throw missingParam('text.format.type');
    const type = stringValue('text.format.type', format.type);
    if (type === 'json_object' || type === 'json_schema') throw unsupported('text.format', `of type '${type}' is not supported yet: only { type: 'text' } is available (no JSON mode).`);
    if (type !== 'text') throw invalidValue('text.format.type', `'${shown(type)}' is not supported. Supported values are: 'text', 'json_object', and 'json_schema'.`);
  }
}
