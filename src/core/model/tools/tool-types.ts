/**
 * Tools as the chat layer sees them, independent of any wire format: the functions a model may
 * call, how the request lets it choose, and the calls it made. The OpenAI edge (chat
 * completions, later the Responses API) translates its JSON into these.
 */
import type { JsonSchema } from '../../sampling/grammar/output-grammar.ts';

/** One callable function (OpenAI `tools[i].function`). */
export interface ToolFunction {
  readonly name: string;
  readonly description?: string;
  /** JSON Schema of the arguments object; absent means "an object" (no arguments described). */
  readonly parameters?: JsonSchema;
  /** OpenAI `strict`; accepted, and the schema is always enforced by the grammar. */
  readonly strict?: boolean;
}

/**
 * How the model may use the tools (OpenAI `tool_choice`): `auto` text or calls, `none` text
 * only, `required` at least one call, `function` at least one call, all to that function.
 */
export type ToolChoice =
  | { readonly type: 'auto' }
  | { readonly type: 'none' }
  | { readonly type: 'required' }
  | { readonly type: 'function'; readonly name: string };

/** A call the model made (or made earlier, in the history). */
export interface ToolCall {
  /** `call_…` (Mistral-style formats: 9 letters and digits). */
  readonly id: string;
  readonly name: string;
  /** The arguments as JSON text, exactly as generated. */
  readonly arguments: string;
}

/** What to make of a request's tools: which to show the model and what it may answer. */
export interface ToolRequest {
  readonly tools: readonly ToolFunction[];
  readonly choice: ToolChoice;
  /** More than one call per answer (OpenAI `parallel_tool_calls`, default true). */
  readonly parallel: boolean;
}

/** A random tool call id: `call_` + 24 letters and digits, or `length` of them without prefix. */
export function newToolCallId(length?: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  const bytes = new Uint8Array(length ?? 24);
  globalThis.crypto.getRandomValues(bytes);
  let id = '';
  for (const byte of bytes) id += alphabet[byte % alphabet.length];
  return length === undefined ? `call_${id}` : id;
}
