/** Typed field access on parsed JSON config files, with errors that name the file and the field. */
import { CheckpointError } from './checkpoint-error.ts';

export type Json = Record<string, unknown>;

/** Typed field access on one JSON object, with errors that name the file and field. */
export class Fields {
  constructor(
    readonly file: string,
    readonly json: Json,
    readonly prefix = '',
  ) {}

  fail(field: string, problem: string): never {
    throw new CheckpointError(this.file, `field '${this.prefix}${field}' ${problem}`);
  }

  /** The raw value, treating `null` as absent. */
  raw(field: string): unknown {
    const value = this.json[field];
    return value === null ? undefined : value;
  }

  positiveInt(field: string, fallback?: number): number {
    const value = this.raw(field) ?? fallback;
    if (value === undefined) this.fail(field, 'is missing');
    if (!Number.isSafeInteger(value) || (value as number) <= 0) this.fail(field, `must be a positive integer, got ${JSON.stringify(value)}`);
    return value as number;
  }

  positiveNumber(field: string, fallback?: number): number {
    const value = this.raw(field) ?? fallback;
    if (value === undefined) this.fail(field, 'is missing');
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) this.fail(field, `must be a positive number, got ${JSON.stringify(value)}`);
    return value;
  }

  /** A positive number, or undefined when absent/null (Gemma's softcaps). */
  optionalPositiveNumber(field: string): number | undefined {
    return this.raw(field) === undefined ? undefined : this.positiveNumber(field);
  }

  /** A non-empty array of finite numbers, of `length` entries when given (longrope factors). */
  numbers(field: string, length?: number): number[] {
    const value = this.raw(field);
    if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === 'number' && Number.isFinite(v))) {
      this.fail(field, `must be a non-empty array of numbers, got ${JSON.stringify(value)?.slice(0, 80)}`);
    }
    if (length !== undefined && value.length !== length) this.fail(field, `must hold ${length} numbers, got ${value.length}`);
    return value as number[];
  }

  boolean(field: string, fallback: boolean): boolean {
    const value = this.raw(field) ?? fallback;
    if (typeof value !== 'boolean') this.fail(field, `must be true or false, got ${JSON.stringify(value)}`);
    return value;
  }

  optionalTokenId(field: string): number | undefined {
    const value = this.raw(field);
    if (value === undefined) return undefined;
    if (!Number.isSafeInteger(value) || (value as number) < 0) this.fail(field, `must be a token id, got ${JSON.stringify(value)}`);
    return value as number;
  }

  /** A token id or an array of them; absent gives []. */
  tokenIds(field: string): number[] {
    const value = this.raw(field);
    if (value === undefined) return [];
    const ids = Array.isArray(value) ? value : [value];
    if (!ids.every((id) => Number.isSafeInteger(id) && id >= 0)) this.fail(field, `must be a token id or an array of token ids, got ${JSON.stringify(value)}`);
    return ids as number[];
  }

  /** A nested object, or undefined when absent/null. */
  object(field: string): Fields | undefined {
    const value = this.raw(field);
    if (value === undefined) return undefined;
    if (typeof value !== 'object' || Array.isArray(value)) this.fail(field, `must be an object, got ${JSON.stringify(value)}`);
    return new Fields(this.file, value as Json, `${this.prefix}${field}.`);
  }
}

export function asObject(file: string, json: unknown): Json {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new CheckpointError(file, 'is not a JSON object');
  return json as Json;
}
