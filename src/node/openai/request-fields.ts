/**
 * Field checks for OpenAI request bodies, with OpenAI's own wording and codes, e.g.
 * "Invalid type for 'temperature': expected a number, but got a string instead." (`invalid_type`)
 * "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead."
 * Each check throws an {@link ApiError} 400 whose `param` is the field's path.
 *
 * Optional fields treat `null` as absent, as the OpenAI API does for its nullable fields.
 */
import { type ApiError, invalidRequest } from './errors.ts';

/** How OpenAI names a JSON value's type in messages: "a string", "an integer", "null", … */
export function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  switch (typeof value) {
    case 'string':
      return 'a string';
    case 'boolean':
      return 'a boolean';
    case 'number':
      return Number.isInteger(value) ? 'an integer' : 'a decimal';
    case 'object':
      return 'an object';
    default:
      return typeof value;
  }
}

export function typeError(param: string, expected: string, value: unknown): ApiError {
  return invalidRequest(
    `Invalid type for '${param}': expected ${expected}, but got ${describeType(value)} instead.`,
    param,
    'invalid_type',
  );
}

export function missingParam(param: string): ApiError {
  return invalidRequest(`Missing required parameter: '${param}'.`, param, 'missing_required_parameter');
}

/** `Unsupported parameter: '${param}' ${why}` with code `unsupported_parameter`. */
export function unsupported(param: string, why: string): ApiError {
  return invalidRequest(`Unsupported parameter: '${param}' ${why}`, param, 'unsupported_parameter');
}

/** An array the API requires to be non-empty, in OpenAI's words, code `empty_array`. */
export function emptyArray(param: string): ApiError {
  return invalidRequest(`Invalid '${param}': empty array. Expected an array with minimum length 1, but got an empty array instead.`, param, 'empty_array');
}

/** `Invalid value for '${param}': ${detail}` with code `invalid_value`. */
export function invalidValue(param: string, detail: string): ApiError {
  return invalidRequest(`Invalid value for '${param}': ${detail}`, param, 'invalid_value');
}

/**
 * A value from the client as an error message quotes it: at most 64 characters, then `…`.
 * Arrays and objects are named by their type, never stringified (a deeply nested array would
 * overflow the stack).
 */
export function shown(value: unknown): string {
  const text = typeof value === 'string' ? value : typeof value === 'object' && value !== null ? describeType(value) : String(value);
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export interface Bounds {
  readonly min?: number;
  /** The minimum itself is refused (`top_p` > 0). */
  readonly minExclusive?: boolean;
  readonly max?: number;
}

function checkBounds(param: string, value: number, kind: 'decimal' | 'integer', bounds: Bounds): number {
  const { min, max, minExclusive = false } = bounds;
  if (min !== undefined && (value < min || (minExclusive && value === min))) {
    const expected = minExclusive ? `> ${min}` : `>= ${min}`;
    throw invalidRequest(
      `Invalid '${param}': ${kind} below minimum value. Expected a value ${expected}, but got ${value} instead.`,
      param,
      `${kind}_below_min_value`,
    );
  }
  if (max !== undefined && value > max) {
    throw invalidRequest(
      `Invalid '${param}': ${kind} above maximum value. Expected a value <= ${max}, but got ${value} instead.`,
      param,
      `${kind}_above_max_value`,
    );
  }
  return value;
}

export function numberValue(param: string, value: unknown, bounds: Bounds = {}): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw typeError(param, 'a number', value);
  return checkBounds(param, value, 'decimal', bounds);
}

export function integerValue(param: string, value: unknown, bounds: Bounds = {}): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) throw typeError(param, 'an integer', value);
  // Beyond 2^53 an integer is no longer exact in JSON numbers: refuse it as out of range.
  const { min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER } = bounds;
  return checkBounds(param, value, 'integer', { ...bounds, min, max });
}

export function booleanValue(param: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw typeError(param, 'a boolean', value);
  return value;
}

export function stringValue(param: string, value: unknown): string {
  if (typeof value !== 'string') throw typeError(param, 'a string', value);
  return value;
}

/** Optional reads of one body's top-level fields; `null` and missing both give undefined. */
export class BodyFields {
  constructor(private readonly body: Readonly<Record<string, unknown>>) {}

  /** The raw value, undefined when missing or null. */
  get(name: string): unknown {
    const value = this.body[name];
    return value === null ? undefined : value;
  }

  number(name: string, bounds?: Bounds): number | undefined {
    const value = this.get(name);
    return value === undefined ? undefined : numberValue(name, value, bounds);
  }

  integer(name: string, bounds?: Bounds): number | undefined {
    const value = this.get(name);
    return value === undefined ? undefined : integerValue(name, value, bounds);
  }

  boolean(name: string): boolean | undefined {
    const value = this.get(name);
    return value === undefined ? undefined : booleanValue(name, value);
  }

  string(name: string): string | undefined {
    const value = this.get(name);
    return value === undefined ? undefined : stringValue(name, value);
  }
}
