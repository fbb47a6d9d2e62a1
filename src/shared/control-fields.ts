/**
 * Strict field readers for parsing control messages. Each reader returns a value of the
 * promised type or throws `ProtocolError('protocol_error')` naming the message kind, the
 * field path and what was expected, e.g.
 * `control message 'hello': field 'adapter.vendor' must be a string (got number)`.
 */
import { ProtocolError } from './protocol-error.ts';
import { MAX_LAYER_INDEX, WIRE_WEIGHT_FORMATS, isSessionId, type LayerRange, type ProtocolVersion, type WireWeights } from './protocol.ts';

/** Longest string field accepted unless a reader says otherwise. */
export const MAX_FIELD_CHARS = 2048;

export function describe(value: unknown): string {
  if (value === undefined) return 'missing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Reads the fields of one JSON object; `path` prefixes nested field names. */
export class FieldReader {
  constructor(
    private readonly kind: string,
    private readonly source: Record<string, unknown>,
    private readonly path = '',
  ) {}

  fail(field: string, expected: string, value: unknown = this.source[field]): never {
    const got = value === undefined ? 'it is missing' : `got ${describe(value)}`;
    const where = `control message '${this.kind}': field '${this.path}${field}'`;
    throw new ProtocolError('protocol_error', `${where} must be ${expected} (${got})`);
  }

  has(field: string): boolean {
    return this.source[field] !== undefined;
  }

  string(field: string, options: { maxChars?: number; allowEmpty?: boolean; pattern?: RegExp } = {}): string {
    const value = this.source[field];
    const maxChars = options.maxChars ?? MAX_FIELD_CHARS;
    const expected = `a ${options.allowEmpty ? '' : 'non-empty '}string of at most ${maxChars} characters`;
    if (typeof value !== 'string') this.fail(field, expected);
    if (!options.allowEmpty && value.length === 0) this.fail(field, expected, 'an empty string');
    if (value.length > maxChars) this.fail(field, expected, `${value.length} characters`);
    if (options.pattern && !options.pattern.test(value)) {
      this.fail(field, `a string matching ${options.pattern}`, 'a string that does not');
    }
    return value;
  }

  boolean(field: string): boolean {
    const value = this.source[field];
    if (typeof value !== 'boolean') this.fail(field, 'a boolean');
    return value;
  }

  /** A finite number ≥ `min` (default 0). */
  number(field: string, min = 0): number {
    const value = this.source[field];
    if (typeof value !== 'number' || !Number.isFinite(value) || value < min) this.fail(field, `a finite number ≥ ${min}`);
    return value;
  }

  /** An integer in `[min, max]`; defaults to a non-negative safe integer (counts, bytes). */
  integer(field: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
    const value = this.source[field];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      this.fail(field, `an integer in [${min}, ${max}]`);
    }
    return value;
  }

  oneOf<T extends string>(field: string, values: readonly T[]): T {
    const value = this.source[field];
    if (typeof value !== 'string' || !(values as readonly string[]).includes(value)) {
      this.fail(field, `one of ${values.map((v) => `'${v}'`).join(', ')}`);
    }
    return value as T;
  }

  sessionId(field: string): string {
    const value = this.source[field];
    if (!isSessionId(value)) {
      this.fail(field, 'a lowercase UUID session id', typeof value === 'string' ? 'a string that is not' : value);
    }
    return value;
  }

  object(field: string): FieldReader {
    const value = this.source[field];
    if (!isPlainObject(value)) this.fail(field, 'an object');
    return new FieldReader(this.kind, value, `${this.path}${field}.`);
  }

  /** A half-open layer range `{ start, end }` with `0 ≤ start < end ≤ 65535`. */
  range(field: string): LayerRange {
    const fields = this.object(field);
    const start = fields.integer('start', 0, MAX_LAYER_INDEX - 1);
    const end = fields.integer('end', 1, MAX_LAYER_INDEX);
    if (end <= start) this.fail(field, 'a half-open range with end > start', `{ start: ${start}, end: ${end} }`);
    return { start, end };
  }

  /** A protocol version `{ major, minor }` of u8 integers (they ride in frame headers). */
  version(field: string): ProtocolVersion {
    const fields = this.object(field);
    return { major: fields.integer('major', 0, 255), minor: fields.integer('minor', 0, 255) };
  }

  /**
   * A weight format `{ format, blockSize, accuracyLevel }`: q8/q4 with a power-of-two block
   * size in [16, 256] and accuracy level 0 or 4; fp32/fp16 with both 0.
   */
  weights(field: string): WireWeights {
    const w = this.object(field);
    const format = w.oneOf('format', WIRE_WEIGHT_FORMATS);
    const blockSize = w.integer('blockSize', 0, 256);
    const accuracyLevel = w.integer('accuracyLevel', 0, 4);
    const quantized = format === 'q8' || format === 'q4';
    if (quantized && !(blockSize >= 16 && (blockSize & (blockSize - 1)) === 0)) w.fail('blockSize', 'a power of two in [16, 256] for q8/q4');
    if (quantized && accuracyLevel !== 0 && accuracyLevel !== 4) w.fail('accuracyLevel', '0 or 4');
    if (!quantized && (blockSize !== 0 || accuracyLevel !== 0)) w.fail(blockSize !== 0 ? 'blockSize' : 'accuracyLevel', `0 for ${format}`);
    return { format, blockSize, accuracyLevel: accuracyLevel as 0 | 4 };
  }

  /** An array of at most `maxItems` entries, each read by `read` (given a reader of the array). */
  list<T>(field: string, read: (item: { oneOf<V extends string>(values: readonly V[]): V; sessionId(): string }) => T, maxItems: number): T[] {
    const value = this.source[field];
    if (!Array.isArray(value) || value.length > maxItems) this.fail(field, `an array of at most ${maxItems} entries`);
    return (value as unknown[]).map((entry, i) =>
      read({
        oneOf: <V extends string>(values: readonly V[]): V => {
          if (typeof entry !== 'string' || !(values as readonly string[]).includes(entry)) this.fail(`${field}[${i}]`, `one of ${values.map((v) => `'${v}'`).join(', ')}`, entry);
          return entry as V;
        },
        sessionId: () => {
          if (!isSessionId(entry)) this.fail(`${field}[${i}]`, 'a lowercase UUID', entry);
          return entry;
        },
      }),
    );
  }

  /** Reads `field` with `read` when present; undefined when absent. */
  optional<T>(field: string, read: (field: string) => T): T | undefined {
    return this.has(field) ? read.call(this, field) : undefined;
  }
}
