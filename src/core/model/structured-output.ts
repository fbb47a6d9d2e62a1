/**
 * From a chat request's output options to what the engine runs: the prompt (tools rendered
 * through the model's own template, or the generic format), the grammar the answer must follow,
 * and the tool-call format to parse it with. Pure; the one place chat completions and the
 * Responses API turn `response_format` / `text.format`, `tools`, `tool_choice` and
 * `parallel_tool_calls` into an engine request.
 *
 * Choices (where OpenAI leaves room):
 * - `tool_choice: none` does not show the tools to the model (the history's calls and results
 *   still render), and its answer is plain text.
 * - `auto` with a JSON `response_format`: the answer is either tool calls or that JSON (one
 *   call in formats without a list wrapper; see `toolCallGrammar`).
 * - `strict` is accepted and the schema is always enforced (as vLLM does); properties the
 *   schema does not name are never generated.
 */
import type { GrammarEngine, JsonSchema, OutputGrammar, StructuralFormat } from '../sampling/grammar/output-grammar.ts';
import type { TokenVocabulary } from '../sampling/grammar/vocabulary.ts';
import { XGrammarEngine, type XGrammarEngineOptions } from '../sampling/grammar/xgrammar-engine.ts';
import type { XGrammarLoader } from '../sampling/grammar/xgrammar-module.ts';
import type { ChatMessage } from './chat-template.ts';
import type { TextTokenizer } from './tokenizer.ts';
import { genericToolMessages } from './tools/generic-tools.ts';
import { detectToolCallFormat, toolCallGrammar, type ToolCallFormat } from './tools/tool-call-format.ts';
import type { ToolFunction, ToolRequest } from './tools/tool-types.ts';

/** OpenAI `response_format` (chat) / `text.format` (Responses), as plain data. */
export type ResponseFormat =
  | { readonly type: 'text' }
  | { readonly type: 'json_object' }
  | { readonly type: 'json_schema'; readonly name: string; readonly schema: JsonSchema; readonly strict?: boolean };

export interface StructuredChatRequest {
  readonly messages: readonly ChatMessage[];
  readonly responseFormat?: ResponseFormat;
  /** Undefined: the request offers no tools. */
  readonly tools?: ToolRequest;
}

export interface StructuredChatPlan {
  /** The rendered prompt; encode it with `addSpecialTokens: false`. */
  readonly prompt: string;
  /** What the answer must look like; undefined for free text. */
  readonly grammar?: OutputGrammar;
  /** Parse tool calls out of the answer with this format; undefined when it can hold none. */
  readonly toolFormat?: ToolCallFormat;
  /** The answer holds only calls (`tool_choice` required or a named function, without a JSON alternative). */
  readonly toolCallsOnly?: boolean;
}

/** JSON for `response_format`, as a structural-tag node (any object for `json_object`). */
function jsonNode(format: ResponseFormat): StructuralFormat | undefined {
  if (format.type === 'json_schema') return { type: 'json_schema', json_schema: format.schema };
  if (format.type === 'json_object') return { type: 'json_schema', json_schema: { type: 'object', additionalProperties: true } };
  return undefined;
}

function jsonGrammar(format: ResponseFormat | undefined): OutputGrammar | undefined {
  if (format?.type === 'json_object') return { kind: 'json_object' };
  if (format?.type === 'json_schema') return { kind: 'json_schema', schema: format.schema };
  return undefined;
}

/**
 * Renders the prompt and picks the grammar for `request` on `tokenizer`'s model. Throws
 * RangeError when `tool_choice` names a function that is not among the tools, and
 * TokenizerError when the template fails.
 */
export function planStructuredChat(tokenizer: TextTokenizer, request: StructuredChatRequest): StructuredChatPlan {
  const format = detectToolCallFormat(tokenizer.chatTemplate.text);
  const tools = request.tools;
  const offered = tools !== undefined && tools.tools.length > 0 && tools.choice.type !== 'none';
  const shown: readonly ToolFunction[] | undefined = offered ? tools.tools : undefined;
  const prompt = format.templateRendersTools
    ? tokenizer.chatTemplate.render(request.messages, { addGenerationPrompt: true, tools: shown })
    : tokenizer.chatTemplate.render(genericToolMessages(request.messages, shown), { addGenerationPrompt: true });
  if (!offered) return { prompt, grammar: jsonGrammar(request.responseFormat) };

  const json = request.responseFormat ? jsonNode(request.responseFormat) : undefined;
  const shape = toolCallGrammar(format, tools.tools, tools.choice, tools.parallel, json);
  return { prompt, grammar: { kind: 'structural_tag', format: shape }, toolFormat: format, toolCallsOnly: tools.choice.type !== 'auto' };
}

/**
 * The grammar engine for one model: xgrammar over the tokenizer's vocabulary (keeping the
 * tool-call format's marker tokens spelled), ending sequences with `stopTokenIds`.
 */
export function createGrammarEngine(load: XGrammarLoader, tokenizer: TextTokenizer, vocabSize: number, stopTokenIds: readonly number[], host?: GrammarHost): GrammarEngine {
  const markers = detectToolCallFormat(tokenizer.chatTemplate.text).syntax.markers;
  const vocabulary = tokenizer.vocabulary(vocabSize, markers);
  return host ? host(vocabulary, { vocabSize, stopTokenIds }) : new XGrammarEngine(load, vocabulary, { vocabSize, stopTokenIds });
}

/**
 * Where a runtime runs the grammar engine instead of this thread (Node: a worker thread, so a
 * compile never stalls the event loop); given the vocabulary and options an XGrammarEngine takes.
 */
export type GrammarHost = (vocabulary: TokenVocabulary, options: XGrammarEngineOptions) => GrammarEngine;
