/**
 * One KvStore per peer: it owns every session's KvState on that peer, the memory budget
 * for KV, and least-recently-used eviction. An evicted session's next step finds no state
 * (a cache miss) and the Route Session rebuilds it.
 */
import type { LayerRange } from '../model/types.ts';
import { KvState, type KvTensorOps } from './kv-state.ts';

const rangeKey = (r: LayerRange) => `${r.start}:${r.end}`;

export interface KvStoreStats {
  readonly entries: number;
  readonly bytes: number;
  readonly budgetBytes: number;
  readonly evictions: number;
}

export class KvStore<T> {
  // Map iteration order is insertion order: re-inserting on use keeps it LRU-ordered.
  private readonly states = new Map<string, KvState<T>>();
  private evictions = 0;
  private readonly pins = new Map<KvState<T>, number>();

  constructor(
    private readonly ops: KvTensorOps<T>,
    private budgetBytes: number,
  ) {}

  /** The state of a session on a range, created empty when absent. Marks it most recently used. */
  acquire(sessionId: string, range: LayerRange): KvState<T> {
    const key = `${sessionId}@${rangeKey(range)}`;
    let state = this.states.get(key);
    if (state) this.states.delete(key);
    else state = new KvState(sessionId, range, this.ops);
    this.states.set(key, state);
    return state;
  }

  /** The state if present (and marks it used), without creating one. */
  find(sessionId: string, range: LayerRange): KvState<T> | undefined {
    const key = `${sessionId}@${rangeKey(range)}`;
    const state = this.states.get(key);
    if (!state) return undefined;
    this.states.delete(key);
    this.states.set(key, state);
    return state;
  }

  /** Dispose one state (e.g. one a failed prefill left empty). */
  discard(state: KvState<T>): void {
    const key = `${state.sessionId}@${rangeKey(state.range)}`;
    if (this.states.get(key) === state) this.states.delete(key);
    state.dispose();
  }

  /** Dispose every state the session holds here. Returns how many were freed. */
  release(sessionId: string): number {
    let freed = 0;
    for (const [key, state] of [...this.states]) {
      if (state.sessionId !== sessionId) continue;
      state.dispose();
      this.states.delete(key);
      freed++;
    }
    return freed;
  }

  /**
   * Mark a state as in use by a running step: it is never evicted until unpinned (another
   * session's step must not dispose tensors a running step is about to replace).
   */
  pin(state: KvState<T>): void {
    this.pins.set(state, (this.pins.get(state) ?? 0) + 1);
  }

  unpin(state: KvState<T>): void {
    const count = (this.pins.get(state) ?? 0) - 1;
    if (count > 0) this.pins.set(state, count);
    else this.pins.delete(state);
  }

  /** Evict least recently used states (never `keep`, never a pinned one) until KV fits the budget. */
  enforceBudget(keep?: KvState<T>): void {
    let bytes = this.bytes;
    for (const [key, state] of this.states) {
      if (bytes <= this.budgetBytes) return;
      if (state === keep || this.pins.has(state)) continue;
      bytes -= state.bytes;
      state.dispose();
      this.states.delete(key);
      this.evictions++;
    }
  }

  setBudget(bytes: number): void {
    this.budgetBytes = bytes;
    this.enforceBudget();
  }

  /** States held (cheap: no byte count). */
  get size(): number {
    return this.states.size;
  }

  get bytes(): number {
    let total = 0;
    for (const state of this.states.values()) total += state.bytes;
    return total;
  }

  stats(): KvStoreStats {
    return { entries: this.states.size, bytes: this.bytes, budgetBytes: this.budgetBytes, evictions: this.evictions };
  }

  /** Free everything (peer shutdown). */
  clear(): void {
    for (const state of this.states.values()) state.dispose();
    this.states.clear();
  }
}
