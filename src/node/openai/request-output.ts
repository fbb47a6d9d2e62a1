/**
 * The output options of a chat request: `response_format`, `tools`, `tool_choice` and
 * `parallel_tool_calls`, validated with OpenAI's wording into core's plain data
 * (`ResponseFormat`, `ToolRequest`). Throws ApiError 400 naming the exact path.
 */
import type { ResponseFormat } from '../../core/model/structured-output.ts';
import type { ToolChoice, ToolFunction, ToolRequest } from '../../core/model/tools/tool-types.ts';
import type { JsonSchema } from '../../core/sampling/grammar/output-grammar.ts';
import { invalidRequest } from './errors.ts';
import { type BodyFields, booleanValue, invalidValue, isRecord, missingParam, shown, stringValue, typeError } from './request-fields.ts';

/** OpenAI's limit on `tools`. */
export const MAX_TOOLS = 128;
/** Function and schema names: OpenAI's pattern. */
const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** A function or schema name: required, a string, OpenAI's pattern (shared with /v1/responses). */
export function functionName(param: string, value: unknown): string {
  if (value === undefined || value === null) throw missingParam(param);
  const text = stringValue(param, value);
  if (!NAME.test(text)) throw invalidValue(param, `'${shown(text)}' does not match '^[a-zA-Z0-9_-]{1,64}$'.`);
  return text;
}

/**
 * How deep a schema's JSON may nest (objects and arrays). OpenAI's structured outputs allow
 * 10 levels of schema nesting, a few JSON levels each; far deeper ones would only overflow the
 * stack of whatever walks them (the template, the grammar compiler).
 */
export const MAX_SCHEMA_DEPTH = 64;

/** Refuses JSON nested deeper than {@link MAX_SCHEMA_DEPTH} (walked without recursion). */
export function checkSchemaDepth(param: string, value: unknown): void {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (typeof node !== 'object' || node === null) continue;
    if (depth > MAX_SCHEMA_DEPTH) {
      throw invalidRequest(`Invalid schema for '${param}': nested deeper than ${MAX_SCHEMA_DEPTH} levels.`, param, 'invalid_schema');
    }
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
}

/** A JSON Schema field: an object or a boolean; undefined when absent or null. */
export function schemaValue(param: string, value: unknown): JsonSchema | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'boolean') return value;
  if (!isRecord(value)) throw typeError(param, 'an object', value);
  checkSchemaDepth(param, value);
  return value;
}

/**
 * A function's `parameters`: absent (no arguments), or a JSON Schema of an object. A schema
 * whose `type` is something else is refused as OpenAI does (arguments are always an object).
 */
export function functionParameters(param: string, name: unknown, value: unknown): JsonSchema | undefined {
  const schema = schemaValue(param, value);
  if (schema === false) throw invalidRequest(`Invalid schema for function '${shown(name)}': schema must be a JSON Schema of 'type: "object"', got 'false'.`, param, 'invalid_function_parameters');
  if (typeof schema !== 'object' || schema.type === undefined || schema.type === 'object') return schema;
  throw invalidRequest(
    `Invalid schema for function '${shown(name)}': schema must be a JSON Schema of 'type: "object"', got 'type: ${JSON.stringify(schema.type)}'.`,
    param,
    'invalid_function_parameters',
  );
}

/** `response_format`: `text`, `json_object`, or `json_schema` with `{ name, schema?, strict? }`. */
export function parseResponseFormat(value: unknown): ResponseFormat | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isRecord(value)) throw typeError('response_format', 'an object', value);
  if (value.type === undefined || value.type === null) throw missingParam('response_format.type');
  const type = stringValue('response_format.type', value.type);
  if (type === 'text' || type === 'json_object') return { type };
  if (type !== 'json_schema') {
    throw invalidValue('response_format.type', `'${shown(type)}' is not supported. Supported values are: 'text', 'json_object' and 'json_schema'.`);
  }
  const spec = value.json_schema;
  if (spec === undefined || spec === null) throw missingParam('response_format.json_schema');
  if (!isRecord(spec)) throw typeError('response_format.json_schema', 'an object', spec);
  const strict = spec.strict === undefined || spec.strict === null ? undefined : booleanValue('response_format.json_schema.strict', spec.strict);
  return {
    type: 'json_schema',
    name: functionName('response_format.json_schema.name', spec.name),
    // No schema: any JSON object, as OpenAI treats it.
    schema: schemaValue('response_format.json_schema.schema', spec.schema) ?? { type: 'object', additionalProperties: true },
    ...(strict === undefined ? {} : { strict }),
  };
}

function parseTool(value: unknown, path: string): ToolFunction {
  if (!isRecord(value)) throw typeError(path, 'an object', value);
  const type = value.type ?? 'function';
  if (type !== 'function') {
    throw invalidValue(`${path}.type`, `'${shown(type)}' is not supported. Supported values are: 'function' (built-in tools are not available).`);
  }
  const fn = value.function;
  if (fn === undefined || fn === null) throw missingParam(`${path}.function`);
  if (!isRecord(fn)) throw typeError(`${path}.function`, 'an object', fn);
  const description = fn.description === undefined || fn.description === null ? undefined : stringValue(`${path}.function.description`, fn.description);
  const parameters = functionParameters(`${path}.function.parameters`, fn.name, fn.parameters);
  const strict = fn.strict === undefined || fn.strict === null ? undefined : booleanValue(`${path}.function.strict`, fn.strict);
  return {
    name: functionName(`${path}.function.name`, fn.name),
    ...(description === undefined ? {} : { description }),
    ...(parameters === undefined ? {} : { parameters }),
    ...(strict === undefined ? {} : { strict }),
  };
}

function parseToolChoice(value: unknown, tools: readonly ToolFunction[]): ToolChoice {
  if (value === undefined) return { type: tools.length > 0 ? 'auto' : 'none' };
  if (typeof value === 'string') {
    if (value === 'auto' || value === 'none' || value === 'required') {
      if (value === 'required' && tools.length === 0) {
        throw invalidRequest("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.", 'tool_choice', 'invalid_value');
      }
      return { type: value };
    }
    throw invalidValue('tool_choice', `'${shown(value)}' is not supported. Supported values are: 'none', 'auto', 'required', or an object naming a function.`);
  }
  if (!isRecord(value)) throw typeError('tool_choice', "one of a string or an object", value);
  if (value.type !== 'function') throw invalidValue('tool_choice.type', `'${shown(value.type)}' is not supported. Supported values are: 'function'.`);
  const fn = value.function;
  if (!isRecord(fn)) throw missingParam('tool_choice.function');
  const chosen = functionName('tool_choice.function.name', fn.name);
  if (!tools.some((t) => t.name === chosen)) {
    throw invalidRequest(`Invalid value for 'tool_choice': no function named '${chosen}' was specified in the 'tools' parameter.`, 'tool_choice', 'invalid_value');
  }
  return { type: 'function', name: chosen };
}

/** `tools` + `tool_choice` + `parallel_tool_calls`; undefined when the request has no tools. */
export function parseTools(fields: BodyFields): ToolRequest | undefined {
  const raw = fields.get('tools');
  let tools: ToolFunction[] = [];
  if (raw !== undefined) {
    if (!Array.isArray(raw)) throw typeError('tools', 'an array', raw);
    if (raw.length > MAX_TOOLS) {
      throw invalidRequest(`Invalid 'tools': array too long. Expected an array with maximum length ${MAX_TOOLS}, but got an array with length ${raw.length} instead.`, 'tools', 'array_above_max_length');
    }
    tools = raw.map((tool: unknown, i) => parseTool(tool, `tools[${i}]`));
    const seen = new Set<string>();
    tools.forEach((tool, i) => {
      if (seen.has(tool.name)) throw invalidValue(`tools[${i}].function.name`, `the function name '${tool.name}' is used twice.`);
      seen.add(tool.name);
    });
  }
  const choice = parseToolChoice(fields.get('tool_choice'), tools);
  const parallel = fields.boolean('parallel_tool_calls') ?? true;
  return tools.length === 0 ? undefined : { tools, choice, parallel };
}
