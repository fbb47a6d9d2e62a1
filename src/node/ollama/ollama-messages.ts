/**
 * Ollama chat `messages` → the chat turns the OpenAI edge validates (`parseMessages`), so one
 * set of rules checks both APIs. Ollama's turns differ in three ways, translated here:
 *
 * - an assistant's `tool_calls` are `[{ function: { name, arguments: {…} } }]` with arguments
 *   as an object and no id: each gets an id (`call_<turn>_<index>`), its arguments as JSON text;
 * - a `tool` turn names its function (`tool_name`) instead of a call id: it answers the
 *   earliest unanswered call of that name (or, without a name, the earliest unanswered call);
 *   one that answers no call gets an id no earlier call has (the history checks decide);
 * - `images` (refused: this model reads text) and `thinking` (an earlier answer's reasoning,
 *   dropped from the prompt as Ollama's templates do) are extra fields.
 */
import type { ChatMessage } from '../../core/model/tokenizer.ts';
import { parseMessages } from '../openai/request-inputs.ts';
import { emptyArray, isRecord, missingParam, stringValue, typeError, unsupported } from '../openai/request-fields.ts';

interface PendingCall {
  readonly id: string;
  readonly name: string;
}

/** Parses Ollama `messages`. Throws ApiError 400 naming `messages[i]…`. */
export function parseOllamaMessages(value: unknown, imageRefusal?: string): ChatMessage[] {
  if (value === undefined || value === null) throw missingParam('messages');
  if (!Array.isArray(value)) throw typeError('messages', 'an array', value);
  if (value.length === 0) throw emptyArray('messages');
  const pending: PendingCall[] = [];
  const openai = value.map((item: unknown, i) => {
    const path = `messages[${i}]`;
    if (!isRecord(item)) throw typeError(path, 'an object', item);
    const images = item.images;
    if (images !== undefined && images !== null && !(Array.isArray(images) && images.length === 0)) {
      throw unsupported(`${path}.images`, `is not supported: ${imageRefusal ?? 'this model reads text only'}.`);
    }
    const content = item.content === undefined || item.content === null ? '' : item.content;
    const { images: _images, thinking: _thinking, tool_calls: rawCalls, tool_name: toolName, ...rest } = item;
    if (item.role === 'assistant' && rawCalls !== undefined && rawCalls !== null) {
      const calls = toolCalls(rawCalls, `${path}.tool_calls`, i);
      for (const call of calls) pending.push({ id: call.id, name: call.function.name });
      return { ...rest, content, tool_calls: calls };
    }
    if (item.role === 'tool') {
      const name = toolName === undefined || toolName === null ? undefined : stringValue(`${path}.tool_name`, toolName);
      const at = pending.findIndex((call) => name === undefined || call.name === name);
      const answered = at === -1 ? undefined : pending.splice(at, 1)[0];
      return { ...rest, content, tool_call_id: answered?.id ?? `unanswered_${i}`, ...(name === undefined ? {} : { name }) };
    }
    return { ...rest, content, ...(rawCalls === undefined || rawCalls === null ? {} : { tool_calls: rawCalls }) };
  });
  return parseMessages(openai, imageRefusal);
}

function toolCalls(value: unknown, path: string, turn: number): { id: string; type: 'function'; function: { name: string; arguments: string } }[] {
  if (!Array.isArray(value)) throw typeError(path, 'an array', value);
  return value.map((call: unknown, j) => {
    const at = `${path}[${j}]`;
    if (!isRecord(call)) throw typeError(at, 'an object', call);
    const fn = call.function;
    if (fn === undefined || fn === null) throw missingParam(`${at}.function`);
    if (!isRecord(fn)) throw typeError(`${at}.function`, 'an object', fn);
    if (fn.name === undefined || fn.name === null) throw missingParam(`${at}.function.name`);
    const args = fn.arguments ?? {};
    if (!isRecord(args)) throw typeError(`${at}.function.arguments`, 'an object', args);
    return { id: `call_${turn}_${j}`, type: 'function' as const, function: { name: stringValue(`${at}.function.name`, fn.name), arguments: JSON.stringify(args) } };
  });
}
