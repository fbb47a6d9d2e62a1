/**
 * One KvStore per peer: it owns every session's KvState on that peer, the memory budget
 * for KV, and least-recently-used eviction. An evicted session's next step finds no state
 * (a cache miss) and the Route Session rebuilds it.
 *
 * Per frame it builds no strings and sums nothing: states are found by session id, then by
 * range (a session holds one state per range, usually one), and the byte total is kept
 * running from each state's own changes.
 */
import type { LayerRange } from '../model/types.ts';
import { KvState, type KvTensorOps } from './kv-state.ts';

export interface KvStoreStats {
  readonly entries: number;
  readonly bytes: number;
  readonly budgetBytes: number;
  readonly evictions: number;
}

const sameRange = (a: LayerRange, b: LayerRange) => a.start === b.start && a.end === b.end;

export class KvStore<T> {
  // Set iteration order is insertion order: re-inserting on use keeps it LRU-ordered.
  private readonly lru = new Set<KvState<T>>();
  private readonly bySession = new Map<string, KvState<T>[]>();
  private readonly pins = new Map<KvState<T>, number>();
  private evictions = 0;
  private total = 0;
  private readonly onBytes = (delta: number) => {
    this.total += delta;
  };

  constructor(
    private readonly ops: KvTensorOps<T>,
    private budgetBytes: number,
  ) {}

  /** The state of a session on a range, created empty when absent. Marks it most recently used. */
  acquire(sessionId: string, range: LayerRange): KvState<T> {
    const found = this.find(sessionId, range);
    if (found) return found;
    const state = new KvState(sessionId, range, this.ops, this.onBytes);
    const states = this.bySession.get(sessionId);
    if (states) states.push(state);
    else this.bySession.set(sessionId, [state]);
    this.lru.add(state);
    return state;
  }

  /** The state if present (and marks it used), without creating one. */
  find(sessionId: string, range: LayerRange): KvState<T> | undefined {
    const state = this.bySession.get(sessionId)?.find((s) => sameRange(s.range, range));
    if (!state) return undefined;
    this.lru.delete(state);
    this.lru.add(state);
    return state;
  }

  /** Dispose one state (e.g. one a failed prefill left empty). */
  discard(state: KvState<T>): void {
    this.forget(state);
    state.dispose();
  }

  /** Take every state of the session out of the store without disposing them (their bytes leave the total). */
  detach(sessionId: string): KvState<T>[] {
    const states = [...(this.bySession.get(sessionId) ?? [])];
    for (const state of states) {
      this.forget(state);
      state.rebind(undefined);
    }
    return states;
  }

  /** Dispose every state the session holds here. Returns how many were freed. */
  release(sessionId: string): number {
    const states = this.bySession.get(sessionId) ?? [];
    for (const state of [...states]) this.discard(state);
    return states.length;
  }

  /** Dispose every state held for `range` (the range is being unloaded). Returns how many were freed. */
  releaseRange(range: LayerRange): number {
    const states = [...this.lru].filter((s) => sameRange(s.range, range));
    for (const state of states) this.discard(state);
    return states.length;
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
    if (this.total <= this.budgetBytes) return;
    for (const state of [...this.lru]) {
      if (this.total <= this.budgetBytes) return;
      if (state === keep || this.pins.has(state)) continue;
      this.discard(state);
      this.evictions++;
    }
  }

  setBudget(bytes: number): void {
    this.budgetBytes = bytes;
    this.enforceBudget();
  }

  /** States held. */
  get size(): number {
    return this.lru.size;
  }

  /** Bytes held by every state (a running total). */
  get bytes(): number {
    return this.total;
  }

  stats(): KvStoreStats {
    return { entries: this.lru.size, bytes: this.total, budgetBytes: this.budgetBytes, evictions: this.evictions };
  }

  /** Free everything (peer shutdown). */
  clear(): void {
    for (const state of [...this.lru]) this.discard(state);
  }

  private forget(state: KvState<T>): void {
    if (!this.lru.delete(state)) return;
    const states = this.bySession.get(state.sessionId)!;
    const rest = states.filter((s) => s !== state);
    if (rest.length > 0) this.bySession.set(state.sessionId, rest);
    else this.bySession.delete(state.sessionId);
  }
}
