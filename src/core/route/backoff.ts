/** Capped exponential backoff delays, as a pure function (the caller owns the timers). */

export interface BackoffOptions {
  /** Delay before the first retry, in milliseconds (≥ 0). */
  readonly baseMs: number;
  /** No delay exceeds this, in milliseconds (≥ baseMs). */
  readonly maxMs: number;
  /** How many delays to return (a non-negative integer). */
  readonly attempts: number;
  /**
   * Fraction of each delay that is randomized, in [0, 1]: delay × (1 − jitter × rng()).
   * 0 or undefined is off (deterministic); 1 is "full jitter" (uniform in (0, delay]).
   */
  readonly jitter?: number;
  /** Uniform numbers in [0, 1); defaults to Math.random. Inject one for reproducible jitter. */
  readonly rng?: () => number;
}

/**
 * `attempts` delays in milliseconds: `min(maxMs, baseMs × 2^i)` for i = 0, 1, …, each reduced
 * by jitter when asked, rounded to whole milliseconds. Throws RangeError on a bad option.
 */
export function backoffDelays(options: BackoffOptions): number[] {
  const { baseMs, maxMs, attempts, jitter = 0, rng = Math.random } = options;
  if (!Number.isFinite(baseMs) || baseMs < 0) throw new RangeError(`baseMs must be a finite number ≥ 0, got ${baseMs}`);
  if (!Number.isFinite(maxMs) || maxMs < baseMs) throw new RangeError(`maxMs must be finite and ≥ baseMs (${baseMs}), got ${maxMs}`);
  if (!Number.isSafeInteger(attempts) || attempts < 0) throw new RangeError(`attempts must be an integer ≥ 0, got ${attempts}`);
  if (!Number.isFinite(jitter) || jitter < 0 || jitter > 1) throw new RangeError(`jitter must be in [0, 1], got ${jitter}`);
  const delays: number[] = [];
  for (let i = 0; i < attempts; i++) {
    const capped = Math.min(maxMs, baseMs * 2 ** i); // 2 ** i → Infinity for huge i; the cap holds
    const factor = jitter === 0 ? 1 : 1 - jitter * clampUnit(rng());
    delays.push(Math.round(capped * factor));
  }
  return delays;
}

function clampUnit(x: number): number {
  return Number.isFinite(x) ? Math.min(Math.max(x, 0), 1) : 0;
}
