/**
 * What the model reads: chat `messages` and completion `prompt`, validated and normalized.
 * Throws ApiError 400 naming the exact path (`messages[1].content[0].type`, `prompt[3]`).
 */
import type { ChatMessage } from '../../core/model/tokenizer.ts';
import { type ApiError, invalidRequest, quoted } from './errors.ts';
import { integerValue, invalidValue, isRecord, missingParam, stringValue, typeError } from './request-fields.ts';

/** OpenAI role → template role. `developer` is the newer name of `system` (o-series clients). */
const ROLES: Readonly<Record<string, ChatMessage['role']>> = {
  system: 'system',
  developer: 'system',
  user: 'user',
  assistant: 'assistant',
};

/** Text parts are joined with a newline, as vLLM and llama.cpp's server do. */
const PART_SEPARATOR = '\n';

function emptyArray(param: string): ApiError {
  return invalidRequest(
    `Invalid '${param}': empty array. Expected an array with minimum length 1, but got an empty array instead.`,
    param,
    'empty_array',
  );
}

function unsupported(param: string, what: string): ApiError {
  return invalidRequest(`Unsupported parameter: '${param}' ${what}`, param, 'unsupported_parameter');
}

/**
 * `messages`: a non-empty array of `{ role, content }`. Roles system, developer (as system),
 * user, assistant; tool and function turns are refused. Content is a string or an array of
 * `{ type: 'text', text }` parts (joined); other part types (images, audio, files) are refused.
 * `name` is ignored. An assistant turn carrying `tool_calls` or `function_call` is refused.
 */
export function parseMessages(value: unknown): ChatMessage[] {
  if (value === undefined || value === null) throw missingParam('messages');
  if (!Array.isArray(value)) throw typeError('messages', 'an array', value);
  if (value.length === 0) throw emptyArray('messages');
  return value.map((item: unknown, i) => parseMessage(item, `messages[${i}]`));
}

function parseMessage(item: unknown, path: string): ChatMessage {
  if (!isRecord(item)) throw typeError(path, 'an object', item);
  if (item.role === undefined || item.role === null) throw missingParam(`${path}.role`);
  const roleName = stringValue(`${path}.role`, item.role);
  const role = Object.hasOwn(ROLES, roleName) ? ROLES[roleName] : undefined; // not `constructor` & co.
  if (role === undefined) {
    throw invalidValue(
      `${path}.role`,
      `'${quoted(roleName)}' is not supported. Supported values are: 'system', 'developer', 'user', and 'assistant' (tool calling is not available).`,
    );
  }
  for (const field of ['tool_calls', 'function_call'] as const) {
    const calls = item[field];
    if (calls !== undefined && calls !== null && !(Array.isArray(calls) && calls.length === 0)) {
      throw unsupported(`${path}.${field}`, 'is not supported: this server does not offer tool calling.');
    }
  }
  return { role, content: parseContent(item.content, `${path}.content`) };
}

function parseContent(value: unknown, path: string): string {
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
      if (type !== 'text') {
        throw invalidValue(`${partPath}.type`, `'${quoted(type)}' is not supported. Supported values are: 'text' (this model reads text only).`);
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
