/**
 * Tool-call formats: how a model family writes its calls, recognised from its chat template,
 * and the grammar that makes it write them correctly (names from the request's tools,
 * arguments matching each tool's schema).
 *
 * | format        | models (template mentions)            | one call                                              |
 * | ------------- | ------------------------------------- | ----------------------------------------------------- |
 * | `hermes`      | Qwen2/2.5/3, Hermes (`<tool_call>`)   | `<tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call>`, calls separated by `\n` |
 * | `llama3_json` | Llama 3.1+ (`<|python_tag|>`, `ipython`) | `{"name": "f", "parameters": {…}}`, calls separated by `; ` |
 * | `mistral`     | Mistral (`[TOOL_CALLS]`)              | `[TOOL_CALLS][{"name": "f", "arguments": {…}}, …]`    |
 * | `generic`     | any template without tool support     | as `hermes`; the tools and results are written into the messages (see generic-tools.ts) |
 *
 * Every format is described by one {@link ToolCallSyntax}; the grammar and the parser are
 * built from it, so a new family is one table entry.
 */
import type { JsonSchema, StructuralFormat, TagFormat } from '../../sampling/grammar/output-grammar.ts';
import type { ToolChoice, ToolFunction } from './tool-types.ts';

export type ToolCallFormatName = 'hermes' | 'llama3_json' | 'mistral' | 'generic';

/** The literal text around calls, in the one layout the grammar enforces. */
export interface ToolCallSyntax {
  /** Opens the list of calls (Mistral `[TOOL_CALLS][`); '' when each call stands alone. */
  readonly listOpen: string;
  /** Closes the list (Mistral `]`); '' without a list. */
  readonly listClose: string;
  /** Written before each call's function name. */
  readonly callOpen: string;
  /** Between the name and the arguments object. */
  readonly nameClose: string;
  /** After the arguments object. */
  readonly callClose: string;
  /** Between two calls. */
  readonly separator: string;
  /** Free text switches to a call when this appears (`tool_choice: auto`). */
  readonly trigger: string;
  /** Special tokens the format writes as text (kept spelled in the grammar's vocabulary). */
  readonly markers: readonly string[];
}

export interface ToolCallFormat {
  readonly name: ToolCallFormatName;
  readonly syntax: ToolCallSyntax;
  /** Whether the chat template renders `tools` and tool turns itself (else: generic-tools.ts). */
  readonly templateRendersTools: boolean;
  /** Mistral templates require 9-character alphanumeric call ids. */
  readonly idLength?: number;
}

const HERMES: ToolCallSyntax = {
  listOpen: '',
  listClose: '',
  callOpen: '<tool_call>\n{"name": "',
  nameClose: '", "arguments": ',
  callClose: '}\n</tool_call>',
  separator: '\n',
  trigger: '<tool_call>',
  markers: [],
};

export const TOOL_CALL_FORMATS: Readonly<Record<ToolCallFormatName, ToolCallFormat>> = {
  hermes: { name: 'hermes', syntax: HERMES, templateRendersTools: true },
  generic: { name: 'generic', syntax: HERMES, templateRendersTools: false },
  llama3_json: {
    name: 'llama3_json',
    templateRendersTools: true,
    syntax: {
      listOpen: '',
      listClose: '',
      callOpen: '{"name": "',
      nameClose: '", "parameters": ',
      callClose: '}',
      separator: '; ',
      trigger: '{"name": "',
      markers: [],
    },
  },
  mistral: {
    name: 'mistral',
    templateRendersTools: true,
    idLength: 9,
    syntax: {
      listOpen: '[TOOL_CALLS][',
      listClose: ']',
      callOpen: '{"name": "',
      nameClose: '", "arguments": ',
      callClose: '}',
      separator: ', ',
      trigger: '[TOOL_CALLS]',
      markers: ['[TOOL_CALLS]'],
    },
  },
};

/**
 * The format a chat template implies: its own tool-call syntax when it has one we know,
 * else `generic` (also for a template that takes `tools` but writes calls some other way:
 * the model would answer in a syntax we cannot constrain or parse).
 */
export function detectToolCallFormat(templateText: string): ToolCallFormat {
  if (templateText.includes('<tool_call>')) return TOOL_CALL_FORMATS.hermes;
  if (templateText.includes('[TOOL_CALLS]')) return TOOL_CALL_FORMATS.mistral;
  if (templateText.includes('<|python_tag|>') || (templateText.includes('ipython') && templateText.includes('"parameters"'))) {
    return TOOL_CALL_FORMATS.llama3_json;
  }
  return TOOL_CALL_FORMATS.generic;
}

/** Arguments of a function that takes none: always `{}`. */
const NO_ARGUMENTS = { type: 'object', properties: {}, additionalProperties: false } as const;

/**
 * The schema a tool's arguments are generated under, normalized as OpenAI treats function
 * parameters: the arguments are always one JSON object.
 * - no `parameters` (or `true`, `{}`): a function without arguments, `{}`;
 * - an object schema that names no properties (`{"type": "object"}`) and does not allow others
 *   explicitly (`additionalProperties` / `patternProperties`): also `{}` — no invented keys;
 * - a schema without `type`: `type: "object"` is added (a non-object `type` is refused at the
 *   HTTP edge, as OpenAI does).
 */
export function toolArgumentsSchema(parameters: ToolFunction['parameters']): JsonSchema {
  if (parameters === undefined || parameters === true) return NO_ARGUMENTS;
  if (parameters === false) return parameters;
  const named = ['properties', 'additionalProperties', 'patternProperties', 'required'].some((key) => parameters[key] !== undefined);
  const compound = ['anyOf', 'oneOf', 'allOf', '$ref', 'enum', 'const'].some((key) => parameters[key] !== undefined);
  if (!named && !compound) return { ...parameters, ...NO_ARGUMENTS };
  return parameters.type === undefined ? { type: 'object', ...parameters } : parameters;
}

function argumentsSchema(tool: ToolFunction): StructuralFormat {
  return { type: 'json_schema', json_schema: toolArgumentsSchema(tool.parameters) };
}

/**
 * The grammar of an answer with `tools` under `choice` (not `none`: that answer has no tool
 * grammar). `auto`: free text, and each trigger starts a call to one of the tools; `required`:
 * only calls, at least one; `function`: only calls to that tool. `parallel: false` allows one
 * call. With `orJson` (a JSON `response_format` under `auto`) the answer is calls or that JSON;
 * xgrammar 0.1.27 accepts a repeated list inside an alternative only within a tag, so formats
 * without a list wrapper (hermes, llama3_json) then allow one call.
 * Throws RangeError when `tools` is empty or the named function is not among them.
 */
export function toolCallGrammar(
  format: ToolCallFormat,
  tools: readonly ToolFunction[],
  choice: Exclude<ToolChoice, { type: 'none' }>,
  parallel: boolean,
  orJson?: StructuralFormat,
): StructuralFormat {
  const { syntax } = format;
  const chosen = choice.type === 'function' ? tools.filter((t) => t.name === choice.name) : tools;
  if (chosen.length === 0) {
    throw new RangeError(choice.type === 'function' ? `no tool is named '${choice.name}'` : 'a tool grammar needs at least one tool');
  }
  const tags: TagFormat[] = chosen.map((tool) => ({
    type: 'tag',
    begin: `${syntax.callOpen}${tool.name}${syntax.nameClose}`,
    content: argumentsSchema(tool),
    end: syntax.callClose,
  }));
  const calls: StructuralFormat = { type: 'tags_with_separator', tags, separator: syntax.separator, at_least_one: true, stop_after_first: !parallel };
  if (orJson && choice.type === 'auto') {
    const list: TagFormat = { type: 'tag', begin: syntax.listOpen, content: calls, end: syntax.listClose };
    return { type: 'or', elements: syntax.listOpen === '' ? [...tags, orJson] : [list, orJson] };
  }
  if (syntax.listOpen === '') {
    if (choice.type !== 'auto') return calls;
    return { type: 'triggered_tags', triggers: [syntax.trigger], tags, stop_after_first: !parallel };
  }
  const list: TagFormat = { type: 'tag', begin: syntax.listOpen, content: calls, end: syntax.listClose };
  if (choice.type !== 'auto') return list;
  return { type: 'triggered_tags', triggers: [syntax.trigger], tags: [list], stop_after_first: true };
}
