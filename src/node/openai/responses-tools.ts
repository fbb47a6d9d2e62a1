/**
 * The output options of a `/v1/responses` body: function `tools`, `tool_choice`,
 * `parallel_tool_calls` and `text.format`, validated into the same core data chat
 * completions builds (`ToolRequest`, `ResponseFormat`), plus what the `Response` echoes back.
 *
 * The Responses shapes are flat where chat nests: `{ type: 'function', name, description,
 * parameters, strict }` (chat: `{ type, function: { … } }`), `tool_choice: { type: 'function',
 * name }`, `text.format: { type: 'json_schema', name, schema, strict, description }`. Built-in
 * tools, `allowed_tools` and hosted tool choices are refused by name. `strict` is accepted and
 * the schema always enforced (as on chat), so a tool's `strict` echoes as given, default true
 * (OpenAI's Responses default).
 */
import type { ResponseFormat } from '../../core/model/structured-output.ts';
import type { ToolChoice, ToolFunction, ToolRequest } from '../../core/model/tools/tool-types.ts';
import { type ApiError, invalidRequest } from './errors.ts';
import { type BodyFields, booleanValue, invalidValue, isRecord, missingParam, shown, stringValue, typeError, unsupported } from './request-fields.ts';
import { checkSchemaDepth, functionName, functionParameters, MAX_TOOLS } from './request-output.ts';

/** A function tool as the Response echoes it (`FunctionTool`). */
export interface FunctionToolEcho {
  readonly type: 'function';
  readonly name: string;
  readonly description: string | null;
  readonly parameters: Readonly<Record<string, unknown>> | null;
  readonly strict: boolean;
}

export type ToolChoiceEcho = 'none' | 'auto' | 'required' | { readonly type: 'function'; readonly name: string };

export type TextFormatEcho =
  | { readonly type: 'text' }
  | { readonly type: 'json_object' }
  | { readonly type: 'json_schema'; readonly name: string; readonly schema: Readonly<Record<string, unknown>>; readonly strict: boolean | null; readonly description?: string };

export interface ResponsesTools {
  /** Undefined when the request offers no function tools. */
  readonly request?: ToolRequest;
  readonly tools: FunctionToolEcho[];
  readonly toolChoice: ToolChoiceEcho;
  readonly parallelToolCalls: boolean;
}

export interface ResponsesTextFormat {
  /** Undefined for plain text. */
  readonly format?: ResponseFormat;
  readonly echo: TextFormatEcho;
}

/** Tool types of the Responses API that are OpenAI's built-in (hosted) tools. */
const BUILT_IN = 'this server offers no built-in tools (web search, file search, computer use, code interpreter, image generation, MCP, shell).';

function optionalString(param: string, value: unknown): string | undefined {
  return value === undefined || value === null ? undefined : stringValue(param, value);
}

function optionalBoolean(param: string, value: unknown): boolean | undefined {
  return value === undefined || value === null ? undefined : booleanValue(param, value);
}

/** A JSON Schema object (Responses takes no boolean schemas); undefined when absent. */
function schemaObject(param: string, value: unknown): Record<string, unknown> | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isRecord(value)) throw typeError(param, 'an object', value);
  checkSchemaDepth(param, value);
  return value;
}

/** A function's `parameters`: an object schema of an object (see `functionParameters`), or null. */
function objectParameters(param: string, name: unknown, value: unknown): Record<string, unknown> | null {
  const schema = schemaObject(param, value);
  if (schema !== undefined) functionParameters(param, name, schema);
  return schema ?? null;
}

function parseTool(value: unknown, path: string): FunctionToolEcho {
  if (!isRecord(value)) throw typeError(path, 'an object', value);
  if (value.type === undefined || value.type === null) throw missingParam(`${path}.type`);
  const type = stringValue(`${path}.type`, value.type);
  if (type !== 'function') throw unsupported(`${path}.type`, `'${shown(type)}' is not supported: ${BUILT_IN}`);
  if (value.defer_loading === true) throw unsupported(`${path}.defer_loading`, 'is not supported: this server has no tool search.');
  return {
    type: 'function',
    name: functionName(`${path}.name`, value.name),
    description: optionalString(`${path}.description`, value.description) ?? null,
    parameters: objectParameters(`${path}.parameters`, value.name, value.parameters),
    strict: optionalBoolean(`${path}.strict`, value.strict) ?? true,
  };
}

function parseToolChoice(value: unknown, tools: readonly FunctionToolEcho[]): ToolChoiceEcho {
  if (value === undefined || value === null) return 'auto';
  if (typeof value === 'string') {
    if (value !== 'none' && value !== 'auto' && value !== 'required') {
      throw invalidValue('tool_choice', `'${shown(value)}' is not supported. Supported values are: 'none', 'auto', 'required', or an object naming a function.`);
    }
    if (value === 'required' && tools.length === 0) {
      throw invalidRequest("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.", 'tool_choice', 'invalid_value');
    }
    return value;
  }
  if (!isRecord(value)) throw typeError('tool_choice', 'one of a string or an object', value);
  if (value.type === undefined || value.type === null) throw missingParam('tool_choice.type');
  const type = stringValue('tool_choice.type', value.type);
  if (type === 'allowed_tools') throw unsupported('tool_choice.type', "'allowed_tools' is not supported: send only the tools the model may call in 'tools'.");
  if (type !== 'function') throw unsupported('tool_choice.type', `'${shown(type)}' is not supported: ${BUILT_IN}`);
  const chosen = functionName('tool_choice.name', value.name);
  if (!tools.some((t) => t.name === chosen)) {
    throw invalidRequest(`Invalid value for 'tool_choice': no function named '${chosen}' was specified in the 'tools' parameter.`, 'tool_choice', 'invalid_value');
  }
  return { type: 'function', name: chosen };
}

function coreChoice(choice: ToolChoiceEcho): ToolChoice {
  return typeof choice === 'string' ? { type: choice } : choice;
}

function coreTool(tool: FunctionToolEcho): ToolFunction {
  return {
    name: tool.name,
    ...(tool.description === null ? {} : { description: tool.description }),
    ...(tool.parameters === null ? {} : { parameters: tool.parameters }),
    strict: tool.strict,
  };
}

/** `tools` (function tools only), `tool_choice` and `parallel_tool_calls`. */
export function parseResponsesTools(fields: BodyFields): ResponsesTools {
  const raw = fields.get('tools');
  let tools: FunctionToolEcho[] = [];
  if (raw !== undefined && raw !== null) {
    if (!Array.isArray(raw)) throw typeError('tools', 'an array', raw);
    // Every entry's type first: a built-in tool is refused by name even in a long list.
    tools = raw.map((tool: unknown, i) => parseTool(tool, `tools[${i}]`));
    if (tools.length > MAX_TOOLS) {
      throw invalidRequest(`Invalid 'tools': array too long. Expected an array with maximum length ${MAX_TOOLS}, but got an array with length ${tools.length} instead.`, 'tools', 'array_above_max_length');
    }
    const seen = new Set<string>();
    tools.forEach((tool, i) => {
      if (seen.has(tool.name)) throw invalidValue(`tools[${i}].name`, `the function name '${tool.name}' is used twice.`);
      seen.add(tool.name);
    });
  }
  const toolChoice = parseToolChoice(fields.get('tool_choice'), tools);
  const parallelToolCalls = fields.boolean('parallel_tool_calls') ?? true;
  const request: ToolRequest | undefined = tools.length === 0 ? undefined : { tools: tools.map(coreTool), choice: coreChoice(toolChoice), parallel: parallelToolCalls };
  return { ...(request ? { request } : {}), tools, toolChoice, parallelToolCalls };
}

/** `text.format`: `text` (the default), `json_object`, or `json_schema` with `{ name, schema, strict?, description? }`. */
export function parseTextFormat(text: unknown): ResponsesTextFormat {
  if (text === undefined || text === null) return { echo: { type: 'text' } };
  if (!isRecord(text)) throw typeError('text', 'an object', text);
  const format = text.format;
  if (format === undefined || format === null) return { echo: { type: 'text' } };
  if (!isRecord(format)) throw typeError('text.format', 'an object', format);
  if (format.type === undefined || format.type === null) throw missingParam('text.format.type');
  const type = stringValue('text.format.type', format.type);
  if (type === 'text') return { echo: { type } };
  if (type === 'json_object') return { format: { type }, echo: { type } };
  if (type !== 'json_schema') throw invalidValue('text.format.type', `'${shown(type)}' is not supported. Supported values are: 'text', 'json_object', and 'json_schema'.`);
  const name = functionName('text.format.name', format.name);
  if (format.schema === undefined || format.schema === null) throw missingParam('text.format.schema');
  const schema = schemaObject('text.format.schema', format.schema)!;
  const strict = optionalBoolean('text.format.strict', format.strict);
  const description = optionalString('text.format.description', format.description);
  return {
    format: { type: 'json_schema', name, schema, ...(strict === undefined ? {} : { strict }) },
    echo: { type: 'json_schema', name, schema, strict: strict ?? null, ...(description === undefined ? {} : { description }) },
  };
}
