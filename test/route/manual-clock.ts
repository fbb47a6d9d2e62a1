/** A Clock whose time moves only when a test says so: deadlines are tested without sleeping. */
import type { Clock } from '../../src/core/runtime/clock.ts';

interface Timer {
  readonly at: number;
  readonly callback: () => void;
}

export class ManualClock implements Clock {
  private time = 1_000_000;
  private readonly timers = new Set<Timer>();

  now(): number {
    return this.time;
  }

  setTimeout(callback: () => void, ms: number): () => void {
    const timer = { at: this.time + Math.max(0, ms), callback };
    this.timers.add(timer);
    return () => this.timers.delete(timer);
  }

  /** Timers waiting now. */
  get pending(): number {
    return this.timers.size;
  }

  /** The earliest timer's remaining time, or undefined with none. */
  get nextIn(): number | undefined {
    let next: number | undefined;
    for (const timer of this.timers) next = next === undefined ? timer.at : Math.min(next, timer.at);
    return next === undefined ? undefined : next - this.time;
  }

  /** Move time forward by `ms`, firing every timer that falls due, in order. */
  advance(ms: number): void {
    this.time += ms;
    const due = [...this.timers].filter((t) => t.at <= this.time).sort((a, b) => a.at - b.at);
    for (const timer of due) {
      this.timers.delete(timer);
      timer.callback();
    }
  }
}
