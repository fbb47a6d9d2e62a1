/**
 * What the model reads: chat `messages` and completion `prompt`, validated and normalized.
 * Throws ApiError 400 naming the exact path (`messages[1].content[0].type`, `prompt[3]`).
 */
import type { ChatMessage } from '../../core/model/tokenizer.ts';
import type { ToolCall } from '../../core/model/tools/tool-types.ts';
import { type ApiError, invalidRequest } from './errors.ts';
import { emptyArray, integerValue, invalidValue, isRecord, missingParam, shown, stringValue, typeError, unsupported } from './request-fields.ts';

/** OpenAI role → template role. `developer` is the newer name of `system` (o-series clients). */
const ROLES: Readonly<Record<string, ChatMessage['role']>> = {
  system: 'system',
  developer: 'system',
  user: 'user',
  assistant: 'assistant',
  tool: 'tool',
};

/** Text parts are joined with a newline, as vLLM and llama.cpp's server do. */
const PART_SEPARATOR = '\n';

/**
 * `messages`: a non-empty array of `{ role, content }`. Roles system, developer (as system),
 * user, assistant, tool; the legacy `function` role is refused. Content is a string or an
 * array of `{ type: 'text', text }` parts (joined); other part types (images, audio, files) are
 * refused (with `imageRefusal`'s reason for image parts when given). An assistant turn may carry `tool_calls` (then its content may be null); a tool turn
 * needs `tool_call_id`. `name` is ignored (except on tool turns, where it names the function).
 */
export function parseMessages(value: unknown, imageRefusal?: string): ChatMessage[] {
  if (value === undefined || value === null) throw missingParam('messages');
  if (!Array.isArray(value)) throw typeError('messages', 'an array', value);
  if (value.length === 0) throw emptyArray('messages');
  const messages = value.map((item: unknown, i) => parseMessage(item, `messages[${i}]`, imageRefusal));
  checkToolTurns(messages);
  return messages;
}

/**
 * A `tool` message answers the assistant turn with `tool_calls` right before it (or before the
 * tool messages that answer the same turn), as OpenAI requires; otherwise 400 with OpenAI's
 * wording (its spelling included).
 */
function checkToolTurns(messages: readonly ChatMessage[]): void {
  let answering = false; // inside the run of tool messages after an assistant turn with calls
  messages.forEach((message, i) => {
    if (message.role === 'tool' && !answering) {
      throw invalidRequest("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", `messages[${i}].role`, null);
    }
    if (message.role !== 'tool') answering = message.role === 'assistant' && (message.toolCalls?.length ?? 0) > 0;
  });
}

function parseMessage(item: unknown, path: string, imageRefusal: string | undefined): ChatMessage {
  if (!isRecord(item)) throw typeError(path, 'an object', item);
  if (item.role === undefined || item.role === null) throw missingParam(`${path}.role`);
  const roleName = stringValue(`${path}.role`, item.role);
  const role = Object.hasOwn(ROLES, roleName) ? ROLES[roleName] : undefined; // not `constructor` & co.
  if (role === undefined) {
    throw invalidValue(
      `${path}.role`,
      `'${shown(roleName)}' is not supported. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'.`,
    );
  }
  const legacy = item.function_call;
  if (legacy !== undefined && legacy !== null) {
    throw unsupported(`${path}.function_call`, "is deprecated and not supported: send 'tool_calls' instead.");
  }
  if (role === 'tool') {
    if (item.tool_call_id === undefined || item.tool_call_id === null) throw missingParam(`${path}.tool_call_id`);
    const toolCallId = stringValue(`${path}.tool_call_id`, item.tool_call_id);
    const name = item.name === undefined || item.name === null ? undefined : stringValue(`${path}.name`, item.name);
    return { role, content: parseContent(item.content, `${path}.content`, imageRefusal), toolCallId, ...(name === undefined ? {} : { name }) };
  }
  const toolCalls = role === 'assistant' ? parseToolCalls(item.tool_calls, `${path}.tool_calls`) : [];
  if (toolCalls.length > 0) {
    const content = item.content === undefined || item.content === null ? '' : parseContent(item.content, `${path}.content`, imageRefusal);
    return { role, content, toolCalls };
  }
  if (role !== 'assistant' && item.tool_calls !== undefined && item.tool_calls !== null) {
    throw invalidValue(`${path}.tool_calls`, `only assistant messages carry tool calls.`);
  }
  return { role, content: parseContent(item.content, `${path}.content`, imageRefusal) };
}

/** An assistant turn's `tool_calls`: `[{ id, type: 'function', function: { name, arguments } }]`. */
function parseToolCalls(value: unknown, path: string): ToolCall[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw typeError(path, 'an array', value);
  return value.map((call: unknown, i) => {
    const at = `${path}[${i}]`;
    if (!isRecord(call)) throw typeError(at, 'an object', call);
    if (call.type !== undefined && call.type !== 'function') throw invalidValue(`${at}.type`, `'${shown(call.type)}' is not supported. Supported values are: 'function'.`);
    if (call.id === undefined || call.id === null) throw missingParam(`${at}.id`);
    const fn = call.function;
    if (fn === undefined || fn === null) throw missingParam(`${at}.function`);
    if (!isRecord(fn)) throw typeError(`${at}.function`, 'an object', fn);
    if (fn.name === undefined || fn.name === null) throw missingParam(`${at}.function.name`);
    if (fn.arguments === undefined || fn.arguments === null) throw missingParam(`${at}.function.arguments`);
    return { id: stringValue(`${at}.id`, call.id), name: stringValue(`${at}.function.name`, fn.name), arguments: stringValue(`${at}.function.arguments`, fn.arguments) };
  });
}

function parseContent(value: unknown, path: string, imageRefusal: string | undefined): string {
  if (value === undefined || value === null) throw missingParam(path);
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) throw typeError(path, 'one of a string or an array of objects', value);
  if (value.length === 0) throw emptyArray(path);
  return value
    .map((part: unknown, j) => {
      const partPath = `${path}[${j}]`;
      if (!isRecord(part)) throw typeError(partPath, 'an object', part);
      if (part.type === undefined || part.type === null) throw missingParam(`${partPath}.type`);
      const type = stringValue(`${partPath}.type`, part.type);
      if (type === 'image_url' && imageRefusal !== undefined) throw invalidValue(`${partPath}.type`, `'image_url' is not supported: ${imageRefusal}.`);
      if (type !== 'text') {
        throw invalidValue(`${partPath}.type`, `'${shown(type)}' is not supported. Supported values are: 'text' (this model reads text only).`);
      }
      if (part.text === undefined || part.text === null) throw missingParam(`${partPath}.text`);
      return stringValue(`${partPath}.text`, part.text);
    })
    .join(PART_SEPARATOR);
}

/**
 * `prompt`: a string, an array of token ids (used as given), or an array holding exactly one
 * string or one array of token ids. Several prompts are refused: one request serves one
 * prompt. Token ids must be integers in [0, vocabSize) when `vocabSize` is known.
 */
export function parsePrompt(value: unknown, vocabSize?: number): string | number[] {
  if (value === undefined || value === null) throw missingParam('prompt');
  if (typeof value === 'string') return value;
  const expected = 'one of a string, an array of strings, an array of integers, or an array of arrays of integers';
  if (!Array.isArray(value)) throw typeError('prompt', expected, value);
  if (value.length === 0) throw emptyArray('prompt');
  if (value.every((x) => typeof x === 'number')) return tokenIds('prompt', value, vocabSize);
  if (value.every((x) => typeof x === 'string' || Array.isArray(x))) {
    if (value.length > 1) {
      throw invalidRequest(
        `Invalid 'prompt': this server completes one prompt per request, but got ${value.length} prompts. Send each prompt as its own request.`,
        'prompt',
        'unsupported_value',
      );
    }
    const only: unknown = value[0];
    if (typeof only === 'string') return only;
    const ids = only as unknown[];
    if (ids.length === 0) throw emptyArray('prompt[0]');
    if (!ids.every((x) => typeof x === 'number')) throw typeError('prompt[0]', 'an array of integers', ids);
    return tokenIds('prompt[0]', ids, vocabSize);
  }
  throw typeError('prompt', expected, value);
}

function tokenIds(path: string, ids: readonly unknown[], vocabSize?: number): number[] {
  const bounds = vocabSize === undefined ? { min: 0 } : { min: 0, max: vocabSize - 1 };
  return ids.map((id, i) => integerValue(`${path}[${i}]`, id, bounds));
}
