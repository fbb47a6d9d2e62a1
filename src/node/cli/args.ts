/** Small argument helpers shared by the CLI commands: typed parsing with usage errors. */

/** A mistake in the command line: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export function parseNumber(flag: string, value: string | undefined, fallback: number, check: (n: number) => boolean = () => true): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || !check(n)) throw new UsageError(`--${flag}: '${value}' is not a valid value`);
  return n;
}

export function parseInteger(flag: string, value: string | undefined, fallback: number, min = 0): number {
  return parseNumber(flag, value, fallback, (n) => Number.isInteger(n) && n >= min);
}

export function parseIntegerList(flag: string, value: string | undefined): number[] | undefined {
  if (value === undefined) return undefined;
  const items = value.split(',').map((s) => s.trim());
  if (items.some((s) => !/^\d+$/.test(s))) throw new UsageError(`--${flag}: '${value}' must be comma-separated non-negative integers`);
  return items.map(Number);
}

export function parseChoice<T extends string>(flag: string, value: string | undefined, choices: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (!choices.includes(value as T)) throw new UsageError(`--${flag}: '${value}' is not one of ${choices.join(', ')}`);
  return value as T;
}

export { DEFAULT_PREFIX_CACHE_MB } from '../defaults.ts';
