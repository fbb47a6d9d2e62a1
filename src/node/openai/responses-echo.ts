/**
 * The request fields a `Response` object repeats back (OpenAI echoes its settings: the
 * instructions, `max_output_tokens`, `temperature`, `top_p`, `metadata`, `truncation`, …).
 * Fields that change nothing here are still type-checked, so a malformed one is a 400.
 */
import { invalidRequest } from './errors.ts';
import { type BodyFields, isRecord, stringValue, typeError } from './request-fields.ts';
import type { FunctionToolEcho, ResponsesTools, TextFormatEcho, ToolChoiceEcho } from './responses-tools.ts';

/** OpenAI's metadata limits: 16 pairs, keys ≤ 64 characters, values ≤ 512. */
export const METADATA_MAX_PAIRS = 16;
export const METADATA_MAX_KEY = 64;
export const METADATA_MAX_VALUE = 512;

export interface ResponseEcho {
  readonly instructions: string | null;
  readonly maxOutputTokens: number | null;
  /** As asked, or OpenAI's default 1. */
  readonly temperature: number;
  readonly topP: number;
  readonly topLogprobs: number;
  readonly metadata: Readonly<Record<string, string>>;
  readonly user?: string;
  readonly safetyIdentifier: string | null;
  readonly promptCacheKey: string | null;
  readonly truncation: 'auto' | 'disabled';
  readonly parallelToolCalls: boolean;
  readonly toolChoice: ToolChoiceEcho;
  readonly tools: readonly FunctionToolEcho[];
  readonly textFormat: TextFormatEcho;
  readonly verbosity: 'low' | 'medium' | 'high';
}

function oneOf<T extends string>(fields: BodyFields, name: string, allowed: readonly T[], fallback: T): T {
  const value = fields.string(name);
  if (value === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(value)) {
    throw invalidRequest(
      `Invalid value: '${value.slice(0, 64)}'. Supported values are: ${allowed.map((a) => `'${a}'`).join(', ')}.`,
      name,
      'invalid_value',
    );
  }
  return value as T;
}

function parseMetadata(value: unknown): Record<string, string> {
  if (value === undefined) return {};
  if (!isRecord(value)) throw typeError('metadata', 'an object', value);
  const entries = Object.entries(value);
  if (entries.length > METADATA_MAX_PAIRS) {
    throw invalidRequest(`Invalid 'metadata': too many properties. Expected an object with at most ${METADATA_MAX_PAIRS} properties, but got ${entries.length} instead.`, 'metadata', 'object_above_max_properties');
  }
  for (const [key, v] of entries) {
    if (key.length > METADATA_MAX_KEY) {
      throw invalidRequest(`Invalid 'metadata': keys are at most ${METADATA_MAX_KEY} characters long, but one has ${key.length}.`, 'metadata', 'invalid_value');
    }
    const text = stringValue(`metadata.${key}`, v);
    if (text.length > METADATA_MAX_VALUE) {
      throw invalidRequest(`Invalid 'metadata.${key}': string too long. Expected a string with maximum length ${METADATA_MAX_VALUE}, but got a string with length ${text.length} instead.`, `metadata.${key}`, 'string_above_max_length');
    }
  }
  return value as Record<string, string>;
}

/** The echoed fields (sampling bounds are checked by the chat request's own parser; tools and format by `responses-tools.ts`). */
export function parseEchoedFields(
  fields: BodyFields,
  parsed: {
    readonly instructions: string | undefined;
    readonly maxOutputTokens: number | undefined;
    readonly topLogprobs: number;
    readonly tools: ResponsesTools;
    readonly textFormat: TextFormatEcho;
  },
): ResponseEcho {
  fields.boolean('store');
  const serviceTier = fields.get('service_tier');
  if (serviceTier !== undefined) stringValue('service_tier', serviceTier);
  const maxToolCalls = fields.get('max_tool_calls');
  if (maxToolCalls !== undefined) fields.integer('max_tool_calls', { min: 1 });
  const text = fields.get('text');
  const verbosityValue = isRecord(text) ? text.verbosity : undefined;
  let verbosity: ResponseEcho['verbosity'] = 'medium';
  if (verbosityValue !== undefined && verbosityValue !== null) {
    const v = stringValue('text.verbosity', verbosityValue);
    if (v !== 'low' && v !== 'medium' && v !== 'high') throw invalidRequest(`Invalid value: '${v.slice(0, 64)}'. Supported values are: 'low', 'medium', and 'high'.`, 'text.verbosity', 'invalid_value');
    verbosity = v;
  }
  const user = fields.string('user');
  const safetyIdentifier = fields.string('safety_identifier');
  // Echoed in the Response, whose schema caps it at 64 characters (as api.openai.com does).
  if (safetyIdentifier !== undefined && safetyIdentifier.length > 64) {
    throw invalidRequest(`Invalid 'safety_identifier': string too long. Expected a string with maximum length 64, but got a string with length ${safetyIdentifier.length} instead.`, 'safety_identifier', 'string_above_max_length');
  }
  return {
    instructions: parsed.instructions ?? null,
    maxOutputTokens: parsed.maxOutputTokens ?? null,
    temperature: fields.number('temperature') ?? 1,
    topP: fields.number('top_p') ?? 1,
    topLogprobs: parsed.topLogprobs,
    metadata: parseMetadata(fields.get('metadata')),
    ...(user === undefined ? {} : { user }),
    safetyIdentifier: safetyIdentifier ?? null,
    promptCacheKey: fields.string('prompt_cache_key') ?? null,
    truncation: oneOf(fields, 'truncation', ['auto', 'disabled'] as const, 'disabled'),
    parallelToolCalls: parsed.tools.parallelToolCalls,
    toolChoice: parsed.tools.toolChoice,
    tools: parsed.tools.tools,
    textFormat: parsed.textFormat,
    verbosity,
  };
}
