/**
 * A hop's recent answer times and the deadline they give its next frame. One per peer and
 * layer range (the Mesh keeps them across sessions, so a new session's first frame on a warm
 * hop already has a deadline). Pure: times come from the caller's clock.
 */

/** A frame may take this many times the hop's recent time per position before it counts as hung. */
export const DEADLINE_SLACK = 8;
/** Weight of the newest frame in the running mean of ms per position. */
const SMOOTHING = 0.2;

export class HopLatency {
  #msPerPosition: number | undefined;
  #answered = 0;

  /** Frames answered so far. */
  get answered(): number {
    return this.#answered;
  }

  /** Recent milliseconds per position (a running mean), or undefined before any answer. */
  get msPerPosition(): number | undefined {
    return this.#msPerPosition;
  }

  /** An answered frame of `positions` positions took `ms`. */
  record(positions: number, ms: number): void {
    if (!(positions >= 1) || !(ms >= 0)) return;
    const rate = ms / positions;
    this.#msPerPosition = this.#msPerPosition === undefined ? rate : this.#msPerPosition * (1 - SMOOTHING) + rate * SMOOTHING;
    this.#answered++;
  }

  /**
   * How long a frame of `positions` positions may take: `DEADLINE_SLACK` × the recent time per
   * position × positions, never less than `floorMs`. Undefined (no deadline) before the hop
   * answered once: the first frame on a newly loaded range may compile shaders (WebGPU).
   */
  deadlineMs(positions: number, floorMs: number): number | undefined {
    if (this.#msPerPosition === undefined) return undefined;
    return Math.max(floorMs, DEADLINE_SLACK * this.#msPerPosition * positions);
  }
}
