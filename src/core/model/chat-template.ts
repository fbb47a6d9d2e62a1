/**
 * Chat templates: pick the Jinja template a tokenizer ships with (or a fallback) and render
 * a conversation with it the way transformers' `apply_chat_template` does.
 *
 * Pure: takes template text, never reads files. Rendering uses @huggingface/jinja, which
 * preprocesses with `trim_blocks` and `lstrip_blocks` like transformers' Jinja environment.
 */
import { Template } from '@huggingface/jinja';
import { TokenizerError } from './tokenizer-error.ts';
import type { ToolCall, ToolFunction } from './tools/tool-types.ts';

/** One turn of a conversation. */
export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant' | 'tool';
  readonly content: string;
  /** Assistant turns: the calls it made. */
  readonly toolCalls?: readonly ToolCall[];
  /** Tool turns: the call this result answers. */
  readonly toolCallId?: string;
  /** Tool turns: the function's name (templates such as Llama's print it). */
  readonly name?: string;
}

/**
 * Plain fallback for tokenizers without a chat template (base models, stories260k).
 * Each turn renders as `<|role|>\ncontent\n`; the generation prompt is `<|assistant|>\n`.
 * It starts with `bos_token` when the tokenizer has one, so — like real templates — its
 * output is meant to be encoded with `addSpecialTokens: false`.
 *
 * Example, bos `<s>`, one user turn "Hi", generation prompt on:
 * `<s><|user|>\nHi\n<|assistant|>\n`
 */
export const DEFAULT_CHAT_TEMPLATE =
  '{% if bos_token %}{{ bos_token }}{% endif %}' +
  '{% for message in messages %}<|{{ message.role }}|>\n{{ message.content }}\n{% endfor %}' +
  '{% if add_generation_prompt %}<|assistant|>\n{% endif %}';

/** A parsed template and where its text came from (used in error messages). */
export interface ChatTemplate {
  readonly template: Template;
  /** The Jinja source (tool-call formats are recognised from it). */
  readonly text: string;
  /** File or option the text came from, e.g. `tokenizer_config.json`. */
  readonly source: string;
  /** True when neither an explicit template nor the tokenizer's own one was available. */
  readonly isFallback: boolean;
}

/** Where template text may come from, highest priority first. */
export interface ChatTemplateSources {
  /** Explicit override (e.g. a `--chat-template` file); wins over the tokenizer's own. */
  readonly override?: { readonly text: string; readonly source: string };
  /** `chat_template` from tokenizer_config.json: a string or a list of `{ name, template }`. */
  readonly configValue?: unknown;
  /** File name to blame for a malformed `configValue`. */
  readonly configSource: string;
  /** Used when there is no other template; defaults to {@link DEFAULT_CHAT_TEMPLATE}. */
  readonly fallback?: string;
}

/**
 * Picks and parses the chat template: override, else the config's (a named list picks
 * `"default"`), else the fallback. Throws {@link TokenizerError} naming the source when the
 * value is malformed or the Jinja does not parse.
 */
export function selectChatTemplate(sources: ChatTemplateSources): ChatTemplate {
  if (sources.override !== undefined) {
    return parse(sources.override.text, sources.override.source, false);
  }
  const fromConfig = templateTextFromConfig(sources.configValue, sources.configSource);
  if (fromConfig !== undefined) return parse(fromConfig, sources.configSource, false);
  if (sources.fallback !== undefined) return parse(sources.fallback, 'fallbackTemplate option', true);
  return parse(DEFAULT_CHAT_TEMPLATE, 'DEFAULT_CHAT_TEMPLATE', true);
}

/**
 * Renders `messages` with the variables transformers passes: `messages`,
 * `add_generation_prompt`, each special token string (`bos_token`, `eos_token`, …) and, when
 * given, `tools` in OpenAI's shape (`{ type: 'function', function: { name, description,
 * parameters } }`). Assistant tool calls go in as `tool_calls: [{ id, type, function: { name,
 * arguments } }]` with `arguments` parsed into an object (as vLLM and transformers pass them:
 * templates print it with `tojson`); tool results carry `tool_call_id` and `name`.
 * Template errors (including `raise_exception(...)`) become a {@link TokenizerError}.
 */
export function renderChatTemplate(
  chat: ChatTemplate,
  messages: readonly ChatMessage[],
  addGenerationPrompt: boolean,
  specialTokenVariables: Readonly<Record<string, string | readonly string[]>>,
  tools?: readonly ToolFunction[],
): string {
  try {
    return chat.template.render({
      ...specialTokenVariables,
      // Plain copies: the template must not see (or mutate) the caller's objects.
      messages: messages.map(templateMessage),
      ...(tools && tools.length > 0 ? { tools: tools.map(templateTool) } : {}),
      add_generation_prompt: addGenerationPrompt,
    });
  } catch (cause) {
    throw new TokenizerError(chat.source, `chat template failed to render: ${messageOf(cause)}`, {
      cause,
    });
  }
}

function templateMessage(m: ChatMessage): Record<string, unknown> {
  const out: Record<string, unknown> = { role: m.role, content: m.content };
  if (m.toolCalls && m.toolCalls.length > 0) {
    out.tool_calls = m.toolCalls.map((call) => ({
      id: call.id,
      type: 'function',
      function: { name: call.name, arguments: parseArguments(call.arguments) },
    }));
  }
  if (m.toolCallId !== undefined) out.tool_call_id = m.toolCallId;
  if (m.name !== undefined) out.name = m.name;
  return out;
}

function templateTool(tool: ToolFunction): Record<string, unknown> {
  const fn: Record<string, unknown> = { name: tool.name };
  if (tool.description !== undefined) fn.description = tool.description;
  fn.parameters = tool.parameters ?? { type: 'object', properties: {} };
  return { type: 'function', function: fn };
}

/** JSON arguments as an object for the template; text that is not JSON stays text. */
function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function templateTextFromConfig(value: unknown, source: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    // transformers' multi-template form: [{ name: 'default', template }, { name: 'tool_use', … }]
    const named = value.find(
      (entry: unknown) =>
        typeof entry === 'object' && entry !== null && (entry as { name?: unknown }).name === 'default',
    ) as { template?: unknown } | undefined;
    if (named === undefined) {
      throw new TokenizerError(source, 'chat_template is a list without a template named "default"');
    }
    if (typeof named.template !== 'string') {
      throw new TokenizerError(source, 'chat_template entry "default" has no string "template"');
    }
    return named.template;
  }
  throw new TokenizerError(source, `chat_template must be a string or a list, got ${typeof value}`);
}

function parse(text: string, source: string, isFallback: boolean): ChatTemplate {
  try {
    return { template: new Template(text), text, source, isFallback };
  } catch (cause) {
    throw new TokenizerError(source, `chat template does not parse: ${messageOf(cause)}`, { cause });
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
