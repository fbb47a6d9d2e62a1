/**
 * Prefix entries of one peer: the KV of finished sessions, kept (per layer range) under a
 * prefix id the head chose, so a later session whose prompt starts with the same tokens can
 * start from it instead of prefilling them again. Apart from live sessions' KV: its own
 * budget (`--prefix-cache`), least recently used entries out first, its own figures.
 *
 * An entry is never written: `fork` gives the new session its own copy of the first
 * positions (copy on write, done at once: the session's first step writes right after).
 */
import type { LayerRange } from '../model/types.ts';
import type { KvState } from './kv-state.ts';

export interface PrefixStoreStats {
  readonly entries: number;
  readonly bytes: number;
  readonly budgetBytes: number;
  readonly hits: number;
  readonly evictions: number;
}

const sameRange = (a: LayerRange, b: LayerRange) => a.start === b.start && a.end === b.end;

export class PrefixStore<T> {
  // Insertion order is recency: a used entry is re-inserted.
  private readonly entries = new Map<string, KvState<T>[]>();
  private total = 0;
  private hits = 0;
  private evictions = 0;
  private readonly onBytes = (delta: number) => {
    this.total += delta;
  };

  constructor(private budgetBytes: number) {}

  /**
   * Keep `states` (a released session's, one per range) as entry `prefixId`, each cut to
   * `length` positions. Returns how many were kept: none when the budget is 0, a state
   * holds fewer positions, or the entry alone would not fit; the rest are disposed.
   */
  keep(prefixId: string, states: readonly KvState<T>[], length: number): number {
    const usable = states.filter((s) => s.length >= length && length > 0);
    for (const s of states) if (!usable.includes(s)) s.dispose();
    if (usable.length === 0) return 0;
    const bytes = usable.reduce((n, s) => n + s.bytes, 0);
    if (bytes > this.budgetBytes) {
      for (const s of usable) s.dispose();
      return 0;
    }
    this.drop(prefixId);
    for (const s of usable) {
      s.truncate(length);
      s.rebind(this.onBytes);
    }
    this.entries.set(prefixId, usable);
    this.enforceBudget(prefixId);
    return usable.length;
  }

  /** The entry's state on `range` if it holds at least `length` positions (marks the entry used). */
  find(prefixId: string, range: LayerRange, length: number): KvState<T> | undefined {
    const states = this.entries.get(prefixId);
    const state = states?.find((s) => sameRange(s.range, range));
    if (!states || !state || state.length < length) return undefined;
    this.entries.delete(prefixId);
    this.entries.set(prefixId, states);
    this.hits++;
    return state;
  }

  setBudget(bytes: number): void {
    this.budgetBytes = bytes;
    this.enforceBudget();
  }

  get bytes(): number {
    return this.total;
  }

  get size(): number {
    return this.entries.size;
  }

  stats(): PrefixStoreStats {
    return { entries: this.entries.size, bytes: this.total, budgetBytes: this.budgetBytes, hits: this.hits, evictions: this.evictions };
  }

  /** Free every entry's state on `range` (its layers were unloaded); entries left with none go. Returns the states freed. */
  releaseRange(range: LayerRange): number {
    let freed = 0;
    for (const [id, states] of [...this.entries]) {
      const gone = states.filter((s) => sameRange(s.range, range));
      if (gone.length === 0) continue;
      for (const s of gone) s.dispose();
      freed += gone.length;
      const left = states.filter((s) => !gone.includes(s));
      if (left.length === 0) this.entries.delete(id);
      else this.entries.set(id, left);
    }
    return freed;
  }

  /** Free every entry. */
  clear(): void {
    for (const id of [...this.entries.keys()]) this.drop(id);
  }

  private drop(prefixId: string): void {
    const states = this.entries.get(prefixId);
    if (!states) return;
    this.entries.delete(prefixId);
    for (const s of states) s.dispose();
  }

  private enforceBudget(keep?: string): void {
    for (const id of [...this.entries.keys()]) {
      if (this.total <= this.budgetBytes) return;
      if (id === keep) continue;
      this.drop(id);
      this.evictions++;
    }
  }
}
