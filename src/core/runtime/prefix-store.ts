/**
 * Prefix entries of one peer: the KV of finished sessions, kept (per layer range) under a
 * prefix id the head chose, so a later session whose prompt starts with the same tokens can
 * start from it instead of prefilling them again. Apart from live sessions' KV: its own
 * budget (`--prefix-cache`), least recently used entries out first, its own figures.
 *
 * Each prefix once (issue 27, protocol 3.3): the entries form a tree. A keep may name a
 * parent entry and the positions it shares with it (`parent.length`): the entry then holds
 * only its tail, positions [shared, length), as a KvSegment of its own, and a fork joins the
 * ancestors' segments and the tail into the new session's KV. Two answers to one system
 * prompt hold the prompt once. A keep without a parent — or on a runtime that cannot join
 * tensors (WebGPU's GPU-buffer KV), or whose parent lacks a range kept — holds a whole copy.
 * Whole copies and tails alike are cut to their positions (no spare room).
 *
 * Eviction takes an entry's descendants with it (they need its positions). Using an entry
 * (keep, fork) marks its ancestors used after it, so least recently used order reaches a
 * leaf before its parent: the budget evicts leaves first, and a parent goes only with its
 * children. A keep under an id already held replaces that entry's positions (the head sends
 * it for a sequence extending the entry) and keeps its children that fit.
 *
 * An entry is never written: a fork gives the new session its own copy of the first
 * positions (copy on write, done at once: the session's first step writes right after).
 */
import type { LayerRange } from '../model/types.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import type { KvState, LayerKv } from './kv-state.ts';
import { KvSegment } from './kv-segment.ts';

export interface PrefixStoreStats {
  readonly entries: number;
  readonly bytes: number;
  readonly budgetBytes: number;
  readonly hits: number;
  readonly evictions: number;
}

/** A keep's parent: entry `prefixId`, whose first `length` positions the kept sequence shares. */
export interface PrefixParent {
  readonly prefixId: string;
  readonly length: number;
}

/** What an entry holds on one range: positions [entry.shared, entry.length), index 0 = position shared. */
type Part<T> = KvSegment<T> | KvState<T>;

interface Entry<T> {
  readonly id: string;
  parent: Entry<T> | undefined;
  /** Positions [0, shared) are the parent's. */
  shared: number;
  length: number;
  parts: Map<string, Part<T>>;
  readonly children: Set<Entry<T>>;
}

const rangeKey = (r: LayerRange) => `${r.start}:${r.end}`;

export class PrefixStore<T> {
  // Insertion order is recency: a used entry is re-inserted, then its ancestors.
  private readonly entries = new Map<string, Entry<T>>();
  private total = 0;
  private hits = 0;
  private evictions = 0;
  private readonly onBytes = (delta: number) => {
    this.total += delta;
  };

  constructor(private budgetBytes: number) {}

  /**
   * Keep `states` (a released session's, one per range) as entry `prefixId`, each cut to
   * `length` positions — only [parent.length, length) when a `parent` is named (protocol 3.3).
   * Returns how many ranges were kept: none when the budget is 0, a state holds fewer
   * positions, or the entry alone would not fit; the rest are disposed. A parent this store
   * does not hold is a `cache_miss`, a shared length outside [1, min(parent length, length))
   * or a parent that is the entry itself or one of its descendants a `protocol_error`; the
   * states are disposed first.
   */
  keep(prefixId: string, states: readonly KvState<T>[], length: number, parent?: PrefixParent): number {
    let held: Entry<T> | undefined;
    try {
      held = parent && this.checkParent(prefixId, parent, length);
    } catch (error) {
      for (const s of states) s.dispose();
      throw error;
    }
    const usable = states.filter((s) => s.length >= length && length > 0);
    for (const s of states) if (!usable.includes(s)) s.dispose();
    if (usable.length === 0) return 0;
    const shared = held ? parent!.length : 0;
    let parts = held && usable.every((s) => this.covers(held!, s.range, shared)) ? this.cut(usable, shared, length) : undefined;
    const tail = parts !== undefined;
    parts ??= this.cut(usable, 0, length); // a whole copy, without spare room
    const bytes = parts ? [...parts.values()].reduce((n, p) => n + p.bytes, 0) : usable.reduce((n, s) => n + s.bytes, 0);
    if (bytes > this.budgetBytes) {
      for (const p of parts?.values() ?? []) p.dispose();
      for (const s of usable) s.dispose();
      return 0;
    }
    if (parts) {
      for (const s of usable) s.dispose();
      this.total += bytes;
    } else {
      // This runtime cannot cut its tensors (KV on the GPU): the states themselves, truncated.
      parts = new Map();
      for (const s of usable) {
        s.truncate(length);
        s.rebind(this.onBytes);
        parts.set(rangeKey(s.range), s);
      }
    }
    const entry = this.install(prefixId, tail ? held : undefined, tail ? shared : 0, length, parts);
    this.touch(entry);
    this.enforceBudget(entry);
    return usable.length;
  }

  /**
   * Fill `target` (an empty session state on `range`) with its own copy of the first `length`
   * positions of entry `prefixId` (its ancestors' and its own). Undefined: the store holds no
   * such entry of that many positions on that range (a cache miss); false: the runtime cannot
   * copy its tensors (KV on the GPU). Marks the entry used.
   */
  fork(prefixId: string, range: LayerRange, length: number, target: KvState<T>): boolean | undefined {
    const entry = this.entries.get(prefixId);
    if (!entry || entry.length < length || length < 1) return undefined;
    const key = rangeKey(range);
    const parts: { past(layer: number): LayerKv<T> | undefined; offset: number; count: number }[] = [];
    let limit = length;
    for (let node: Entry<T> | undefined = entry; node && limit > 0; node = node.parent) {
      if (limit <= node.shared) continue;
      const part = node.parts.get(key);
      if (!part) return undefined;
      parts.unshift({ past: (layer) => part.past(layer), offset: 0, count: limit - node.shared });
      limit = node.shared;
    }
    const only = parts.length === 1 ? entry.parts.get(key) : undefined;
    // A whole copy held as a session state (a runtime that cannot join) forks as before: a copy of its first positions.
    const copied = only && !(only instanceof KvSegment) ? target.copyFrom(only, length) : target.assemble(parts, length);
    this.touch(entry);
    if (copied) this.hits++;
    return copied;
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

  /** Free every entry's state on `range` (its layers were unloaded); entries left with none go, with their descendants. Returns the states freed. */
  releaseRange(range: LayerRange): number {
    const key = rangeKey(range);
    let freed = 0;
    for (const entry of this.entries.values()) {
      const part = entry.parts.get(key);
      if (!part) continue;
      this.free(part);
      entry.parts.delete(key);
      freed++;
    }
    for (const entry of [...this.entries.values()]) if (entry.parts.size === 0 && this.entries.get(entry.id) === entry) this.drop(entry);
    return freed;
  }

  /**
   * Protocol 3.5 `forget`: drop the entries `prefixIds` names — the head's registry no longer
   * holds them — each with its descendants (they need its positions; the head forgets an
   * entry's descendants with it, so it holds none of them either). Ids not held are ignored.
   * Returns how many entries went.
   */
  forget(prefixIds: readonly string[]): number {
    let dropped = 0;
    for (const id of prefixIds) {
      const entry = this.entries.get(id);
      if (entry) dropped += this.drop(entry);
    }
    return dropped;
  }

  /** Free every entry. */
  clear(): void {
    for (const entry of [...this.entries.values()]) if (this.entries.has(entry.id)) this.drop(entry);
  }

  /** The parent a keep names, checked (see `keep`). */
  private checkParent(prefixId: string, parent: PrefixParent, length: number): Entry<T> {
    const held = this.entries.get(parent.prefixId);
    if (!held) throw new ProtocolError('cache_miss', `keepPrefix.parent ${parent.prefixId} is not a prefix entry of this peer`);
    if (!Number.isSafeInteger(parent.length) || parent.length < 1 || parent.length > held.length || parent.length >= length) {
      throw new ProtocolError('protocol_error', `keepPrefix.parent.length ${parent.length} must be in [1, ${Math.min(held.length, length - 1)}] (the parent holds ${held.length} positions, the entry ${length})`);
    }
    for (let node: Entry<T> | undefined = held; node; node = node.parent) {
      if (node.id === prefixId) throw new ProtocolError('protocol_error', `keepPrefix.parent ${parent.prefixId} is entry ${prefixId} itself or one of its descendants`);
    }
    return held;
  }

  /** Whether `entry` and its ancestors hold positions [0, length) on `range`. */
  private covers(entry: Entry<T>, range: LayerRange, length: number): boolean {
    let limit = length;
    for (let node: Entry<T> | undefined = entry; node && limit > 0; node = node.parent) {
      if (limit <= node.shared) continue;
      if (!node.parts.has(rangeKey(range))) return false;
      limit = node.shared;
    }
    return true;
  }

  /** Positions [from, to) of every state as segments, or undefined when one cannot be cut (none is kept then). */
  private cut(states: readonly KvState<T>[], from: number, to: number): Map<string, Part<T>> | undefined {
    const parts = new Map<string, Part<T>>();
    for (const s of states) {
      const segment = KvSegment.cut(s, from, to);
      if (!segment) {
        for (const p of parts.values()) p.dispose();
        return undefined;
      }
      parts.set(rangeKey(s.range), segment);
    }
    return parts;
  }

  /** Put an entry in place: a new one, or the held entry of that id with new positions (its children that fit stay). */
  private install(id: string, parent: Entry<T> | undefined, shared: number, length: number, parts: Map<string, Part<T>>): Entry<T> {
    const old = this.entries.get(id);
    if (!old) {
      const entry: Entry<T> = { id, parent, shared, length, parts, children: new Set() };
      parent?.children.add(entry);
      this.entries.set(id, entry);
      return entry;
    }
    for (const part of old.parts.values()) this.free(part);
    old.parent?.children.delete(old);
    old.parent = parent;
    parent?.children.add(old);
    old.shared = shared;
    old.length = length;
    old.parts = parts;
    for (const child of [...old.children]) {
      if (child.shared > length) this.drop(child);
    }
    return old;
  }

  /** Mark `entry` used, then its ancestors (so they stay more recent than any descendant). */
  private touch(entry: Entry<T>): void {
    for (let node: Entry<T> | undefined = entry; node; node = node.parent) {
      this.entries.delete(node.id);
      this.entries.set(node.id, node);
    }
  }

  /** Drop `entry` and its descendants; returns how many went. */
  private drop(entry: Entry<T>): number {
    let count = 1;
    for (const child of [...entry.children]) count += this.drop(child);
    entry.parent?.children.delete(entry);
    for (const part of entry.parts.values()) this.free(part);
    entry.parts.clear();
    this.entries.delete(entry.id);
    return count;
  }

  private free(part: Part<T>): void {
    if (part instanceof KvSegment) this.total -= part.bytes;
    part.dispose(); // a KvState tells onBytes itself
  }

  private enforceBudget(keep?: Entry<T>): void {
    const kept = new Set<Entry<T>>();
    for (let node = keep; node; node = node.parent) kept.add(node);
    for (const entry of [...this.entries.values()]) {
      if (this.total <= this.budgetBytes) return;
      if (kept.has(entry) || this.entries.get(entry.id) !== entry) continue;
      this.evictions += this.drop(entry);
    }
  }
}
