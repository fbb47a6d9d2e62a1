/**
 * `input` of a `/v1/responses` body → the chat history `/v1/chat/completions` would build for
 * the same conversation:
 *
 * - a string: one user message;
 * - message items (`{ role, content }`, `type: 'message'` optional): roles user / system /
 *   developer (as system) / assistant, content a string or `input_text` / `output_text` parts
 *   (joined with a newline, as chat parts are);
 * - `function_call` items (`{ call_id, name, arguments }`): the assistant's calls. Consecutive
 *   calls, and calls right after an assistant message, are one assistant turn with
 *   `tool_calls`, as the chat form of the same answer;
 * - `function_call_output` items (`{ call_id, output }`, output a string or `input_text`
 *   parts): a `tool` turn answering the call of that id, which must come earlier in `input`
 *   (nothing is stored here to look it up in).
 *
 * Every refusal is an ApiError 400 whose `param` is the item's path.
 */
import type { ChatMessage } from '../../core/model/tokenizer.ts';
import type { ToolCall } from '../../core/model/tools/tool-types.ts';
import { type ApiError, invalidRequest } from './errors.ts';
import { emptyArray, invalidValue, isRecord, missingParam, shown, stringValue, typeError, unsupported } from './request-fields.ts';

const ROLES: Readonly<Record<string, ChatMessage['role']>> = { user: 'user', system: 'system', developer: 'system', assistant: 'assistant' };
const PART_SEPARATOR = '\n';
/** OpenAI's limit on a call id. */
const MAX_CALL_ID = 64;

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

/** `input`: a string, or a non-empty array of items. */
export function parseInput(value: unknown, imageRefusal?: string): ChatMessage[] {
  if (value === undefined) throw missingParam('input');
  if (typeof value === 'string') return [{ role: 'user', content: value }];
  if (!Array.isArray(value)) throw typeError('input', 'one of a string or an array of input items', value);
  if (value.length === 0) throw emptyArray('input');
  const history = new InputHistory(imageRefusal);
  value.forEach((item: unknown, i) => history.add(item, `input[${i}]`));
  return history.messages;
}

/** The chat turns so far, and the calls they made (by call id, for the outputs). */
class InputHistory {
  readonly messages: ChatMessage[] = [];
  private readonly calls = new Map<string, string>(); // call id → function name

  constructor(private readonly imageRefusal: string | undefined) {}

  add(item: unknown, path: string): void {
    if (!isRecord(item)) throw typeError(path, 'an object', item);
    const type = item.type === undefined || item.type === null ? 'message' : stringValue(`${path}.type`, item.type);
    if (type === 'message') this.messages.push(parseMessage(item, path, this.imageRefusal));
    else if (type === 'function_call') this.addCall(item, path);
    else if (type === 'function_call_output') this.addOutput(item, path);
    else throw refusedItem(type, `${path}.type`);
  }

  private addCall(item: Record<string, unknown>, path: string): void {
    const call: ToolCall = { id: callId(item.call_id, `${path}.call_id`), name: required(item.name, `${path}.name`), arguments: required(item.arguments, `${path}.arguments`) };
    if (this.calls.has(call.id)) throw invalidValue(`${path}.call_id`, `the call id '${call.id}' is used twice.`);
    this.calls.set(call.id, call.name);
    const last = this.messages.at(-1);
    if (last?.role === 'assistant') this.messages[this.messages.length - 1] = { ...last, toolCalls: [...(last.toolCalls ?? []), call] };
    else this.messages.push({ role: 'assistant', content: '', toolCalls: [call] });
  }

  private addOutput(item: Record<string, unknown>, path: string): void {
    const id = callId(item.call_id, `${path}.call_id`);
    const name = this.calls.get(id);
    if (name === undefined) {
      throw invalidRequest(`No tool call found for function call output with call_id ${id}: send the 'function_call' item before its output.`, `${path}.call_id`, 'invalid_value');
    }
    this.messages.push({ role: 'tool', content: parseOutput(item.output, `${path}.output`), toolCallId: id, name });
  }
}

function required(value: unknown, path: string): string {
  if (value === undefined || value === null) throw missingParam(path);
  return stringValue(path, value);
}

function callId(value: unknown, path: string): string {
  const id = required(value, path);
  if (id.length < 1 || id.length > MAX_CALL_ID) {
    throw invalidRequest(`Invalid '${path}': expected a string of 1 to ${MAX_CALL_ID} characters, but got ${id.length} characters instead.`, path, 'invalid_value');
  }
  return id;
}

function parseMessage(item: Record<string, unknown>, path: string, imageRefusal: string | undefined): ChatMessage {
  if (item.role === undefined || item.role === null) throw missingParam(`${path}.role`);
  const roleName = stringValue(`${path}.role`, item.role);
  const role = Object.hasOwn(ROLES, roleName) ? ROLES[roleName] : undefined; // not `constructor` & co.
  if (role === undefined) {
    throw invalidValue(
      `${path}.role`,
      `'${shown(roleName)}' is not supported. Supported values are: 'user', 'system', 'developer', and 'assistant' (tool results are 'function_call_output' items).`,
    );
  }
  return { role, content: parseContent(item.content, `${path}.content`, imageRefusal) };
}

function refusedItem(type: string, param: string): ApiError {
  if (type === 'item_reference') return unsupported(param, "'item_reference' items are not supported: this server stores no responses; send the items themselves (with the AI SDK: providerOptions.openai.store = false).");
  if (type === 'reasoning') return unsupported(param, "'reasoning' items are not supported: this model does not reason.");
  if (BUILT_IN_ITEMS.has(type)) return unsupported(param, `'${type}' items are not supported: this server offers no built-in tools.`);
  return invalidValue(param, `'${shown(type)}' is not supported. Supported values are: 'message', 'function_call', and 'function_call_output'.`);
}

/** A function's output: a string, or `input_text` parts (joined). */
function parseOutput(value: unknown, path: string): string {
  if (value === undefined || value === null) throw missingParam(path);
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) throw typeError(path, 'one of a string or an array of content parts', value);
  return textParts(value, path, ['input_text']);
}

function parseContent(value: unknown, path: string, imageRefusal: string | undefined): string {
  if (value === undefined || value === null) throw missingParam(path);
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) throw typeError(path, 'one of a string or an array of content parts', value);
  if (value.length === 0) throw emptyArray(path);
  return textParts(value, path, ['input_text', 'output_text'], imageRefusal);
}

function textParts(parts: readonly unknown[], path: string, textTypes: readonly string[], imageRefusal?: string): string {
  return parts
    .map((part: unknown, j) => {
      const partPath = `${path}[${j}]`;
      if (!isRecord(part)) throw typeError(partPath, 'an object', part);
      if (part.type === undefined || part.type === null) throw missingParam(`${partPath}.type`);
      const type = stringValue(`${partPath}.type`, part.type);
      if (textTypes.includes(type)) {
        if (part.text === undefined || part.text === null) throw missingParam(`${partPath}.text`);
        return stringValue(`${partPath}.text`, part.text);
      }
      if (type === 'input_image' && imageRefusal !== undefined) throw unsupported(`${partPath}.type`, `'input_image' is not supported: ${imageRefusal}.`);
      const media: Record<string, string> = { input_image: 'images', input_file: 'files', input_audio: 'audio' };
      if (Object.hasOwn(media, type)) return unsupportedPart(partPath, type, media[type]);
      if (type === 'refusal') return unsupportedPart(partPath, type, 'refusal parts');
      throw invalidValue(`${partPath}.type`, `'${shown(type)}' is not supported. Supported values are: ${textTypes.map((t) => `'${t}'`).join(' and ')}.`);
    })
    .join(PART_SEPARATOR);
}

function unsupportedPart(path: string, type: string, what: string): never {
  throw unsupported(`${path}.type`, `'${type}' is not supported: this model reads text only (no ${what}).`);
}
