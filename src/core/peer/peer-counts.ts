/**
 * What a peer keeps count of besides its KV: the frames and tokens it served (its `stats`
 * answer), the steps running on each of its ranges (an unload waits for them), and the
 * sessions it released.
 */
import type { StatsMessage } from '../../shared/control.ts';

/** Frames and tokens served, for `stats`. */
export class ServedCounts {
  tokens = 0;
  frames = 0;
  /** One-position (decode) frames: count, ms handling them whole, ms inside the executor. */
  readonly decode = { frames: 0, busyMs: 0, runMs: 0 };
  readonly batches = { frames: 0, entries: 0 };

  fields(): Pick<StatsMessage, 'tokensServed' | 'framesServed' | 'decodeFrames' | 'decodeBusyMs' | 'decodeRunMs' | 'batchFrames' | 'batchedEntries'> {
    return {
      tokensServed: this.tokens,
      framesServed: this.frames,
      decodeFrames: this.decode.frames,
      decodeBusyMs: this.decode.busyMs,
      decodeRunMs: this.decode.runMs,
      batchFrames: this.batches.frames,
      batchedEntries: this.batches.entries,
    };
  }
}

/** Steps running per range (a number key), and who waits for a range to be idle. */
export class RangeActivity {
  private readonly running = new Map<number, number>();
  private readonly idleWaiters = new Map<number, (() => void)[]>();

  started(key: number): void {
    this.running.set(key, (this.running.get(key) ?? 0) + 1);
  }

  ended(key: number): void {
    const left = (this.running.get(key) ?? 1) - 1;
    if (left > 0) return void this.running.set(key, left);
    this.running.delete(key);
    const waiters = this.idleWaiters.get(key);
    this.idleWaiters.delete(key);
    for (const wake of waiters ?? []) wake();
  }

  /** Resolves once no step runs on `key` (at once when none does). */
  idle(key: number): Promise<void> {
    if ((this.running.get(key) ?? 0) === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.idleWaiters.set(key, [...(this.idleWaiters.get(key) ?? []), resolve]));
  }
}

/** How many released session ids a peer remembers, to tell `unknown_session` from a cache miss. */
const RELEASED_MEMORY = 4096;

/** The last RELEASED_MEMORY sessions released on the peer. */
export class ReleasedSessions {
  private readonly ids = new Set<string>();

  add(sessionId: string): void {
    this.ids.add(sessionId);
    if (this.ids.size > RELEASED_MEMORY) this.ids.delete(this.ids.values().next().value!);
  }

  has(sessionId: string): boolean {
    return this.ids.has(sessionId);
  }
}
