/**
 * A hop's recent answer times and the deadline they give its next frame. One per peer and
 * layer range (the Mesh keeps them across sessions; a range's warm-up starts its record, so a
 * session's first frame on it already has a deadline). Pure: times come from the caller's clock.
 *
 * The rule: a frame of `positions` positions may take
 *   clamp(DEADLINE_SLACK × p99 × positions, DEADLINE_FLOOR_MS, ceiling × max(1, positions / CEILING_POSITIONS))
 * where p99 is the 99th percentile of the hop's last LATENCY_WINDOW answers in ms per position
 * and the ceiling is `--hop-timeout`. The floor (1 s) is what keeps a healthy hop from being
 * replaced under load: it covers a garbage-collection pause or a scheduler stall of a loaded
 * 2-core machine (hundreds of ms), on top of the hop's own time, which the p99 already
 * follows as load grows; and 1 s plus the replay on a replacement stays inside the 1.5 s gap
 * the issue asks of a stopped peer on loopback. The ceiling grows with the frame's positions
 * past CEILING_POSITIONS (a decode step, a speculative verify): a long prefill chunk on a slow
 * peer is not a hang.
 *
 * A frame of a position count the hop has not answered yet gets the ceiling instead: its first
 * run may include one-time work the p99 has not seen — onnxruntime-web on WebGPU compiles
 * kernels for each new shape (measured: a tab's first 3-position speculative verify took over
 * 2 s on SwiftShader where its decode steps took 50–190 ms). Decode steps and verify frames
 * repeat their few shapes, so a hang there is still caught at the adaptive deadline.
 */

/** A frame may take this many times the hop's recent p99 per position before it counts as hung. */
export const DEADLINE_SLACK = 4;
/** No deadline is shorter, ms (see the rule above). */
export const DEADLINE_FLOOR_MS = 1000;
/** Frames of up to this many positions get the plain ceiling; longer ones a proportionally longer one. */
export const CEILING_POSITIONS = 16;
/** How many recent answers the percentile is taken over. */
export const LATENCY_WINDOW = 128;
/** Position counts remembered as answered (past this many, every count counts as seen). */
export const SHAPES_REMEMBERED = 256;

export class HopLatency {
  /** Ring of recent ms per position. */
  readonly #window: number[] = [];
  #next = 0;
  #answered = 0;
  #p99: number | undefined;
  /** Position counts answered at least once. */
  readonly #shapes = new Set<number>();

  /** Frames answered so far. */
  get answered(): number {
    return this.#answered;
  }

  /** The 99th percentile of recent ms per position, or undefined before any answer. */
  get p99MsPerPosition(): number | undefined {
    if (this.#window.length === 0) return undefined;
    // This runs once per answered frame (record clears it): the value the sorted window would
    // hold at the 99th-percentile index is found without sorting — over a window of at most
    // LATENCY_WINDOW (128) answers it is the largest or the second largest (sorting a copy per
    // frame was the head's largest JS cost per hop frame, bench/hop-js.ts).
    if (this.#p99 === undefined) this.#p99 = orderStatistic(this.#window, Math.min(this.#window.length - 1, Math.ceil(0.99 * this.#window.length) - 1));
    return this.#p99;
  }

  /** An answered frame of `positions` positions took `ms`. */
  record(positions: number, ms: number): void {
    if (!(positions >= 1) || !(ms >= 0) || !Number.isFinite(ms)) return;
    const rate = ms / positions;
    if (this.#window.length < LATENCY_WINDOW) this.#window.push(rate);
    else this.#window[this.#next] = rate;
    this.#next = (this.#next + 1) % LATENCY_WINDOW;
    this.#p99 = undefined;
    this.#answered++;
    if (this.#shapes.size < SHAPES_REMEMBERED) this.#shapes.add(positions);
  }

  /**
   * How long a frame of `positions` positions may take under `ceilingMs` (`--hop-timeout`), by
   * the rule above; before any answer (a range that was not warmed up), or for a position
   * count not answered yet, the ceiling.
   */
  deadlineMs(positions: number, ceilingMs: number, floorMs = DEADLINE_FLOOR_MS): number {
    const ceiling = ceilingMs * Math.max(1, positions / CEILING_POSITIONS);
    const p99 = this.p99MsPerPosition;
    if (p99 === undefined) return ceiling;
    if (!this.#shapes.has(positions) && this.#shapes.size < SHAPES_REMEMBERED) return ceiling;
    return Math.min(ceiling, Math.max(Math.min(floorMs, ceiling), DEADLINE_SLACK * p99 * positions));
  }
}

/**
 * The value at index `k` of `values` sorted ascending (`values` finite, not NaN), unchanged.
 * When `k` is near the top — a percentile near 100 — one pass keeps the few largest seen; else a sorted copy.
 */
export function orderStatistic(values: readonly number[], k: number): number {
  const above = values.length - 1 - k; // how many values sort after the one wanted
  if (above > 3) return Float64Array.from(values).sort()[k]!;
  // top[0] ≥ top[1] ≥ … the `above + 1` largest values so far.
  const top: number[] = [];
  for (const v of values) {
    if (top.length > above && !(v > top[above]!)) continue;
    let i = Math.min(top.length, above);
    if (top.length <= above) top.push(v);
    while (i > 0 && v > top[i - 1]!) {
      top[i] = top[i - 1]!;
      i--;
    }
    top[i] = v;
  }
  return top[above]!;
}
