/**
 * What the head remembers of the prefix entries its hops hold (issue 17's prefix reuse): for
 * each entry, the tokens whose KV it holds, the hops (peer and range) that keep it, and each
 * hop's recorded inputs for those positions (so a hop that later loses a forked session's KV
 * is rebuilt by the same replay as any other). Pure bookkeeping: the Route Session forks
 * from an entry and registers the entries its finished sessions leave behind.
 *
 * The head cannot see a peer's eviction: a fork from an entry a hop no longer holds answers
 * `cache_miss`, the session starts cold and the entry is forgotten here.
 *
 * Each prefix once per hop (issue 27): a finished session's KV is kept under the id of the
 * entry its tokens equal or extend (`idFor`), so the peer's keep replaces that entry (a peer
 * keeps one entry per id) instead of adding a copy; a session whose tokens equal a held
 * entry keeps nothing (`isHeld`); sessions finishing at once with the same tokens share one
 * pending id. 100 identical requests leave one entry per hop, and the entries (and memory)
 * follow the distinct token sequences. Sequences that only share a head (two answers to one
 * system prompt) are two entries, each with its own copy of the shared positions.
 */
import type { LayerRange } from '../model/types.ts';
import type { Activations } from '../runtime/shard-executor.ts';

export interface PrefixHop {
  readonly peerId: string;
  readonly range: LayerRange;
}

export interface PrefixEntry {
  readonly prefixId: string;
  /** The tokens of positions [0, tokens.length): the KV each hop keeps. */
  readonly tokens: readonly number[];
  readonly hops: readonly PrefixHop[];
  /** Per hop, its inputs for those positions ([1, tokens.length, hidden]). */
  readonly inputs: readonly Activations[];
}

export interface PrefixMatch {
  readonly entry: PrefixEntry;
  /** Positions to reuse: the common prefix, at least one prompt token left to feed. */
  readonly length: number;
}

export interface PrefixRegistryOptions {
  /** Fewest tokens worth a fork (default 16). */
  readonly minTokens?: number;
  /** Most entries remembered (default 64). */
  readonly maxEntries?: number;
  /** Most bytes of recorded inputs held (default 256 MiB). */
  readonly maxBytes?: number;
}

const sameHops = (a: readonly PrefixHop[], b: readonly PrefixHop[]) =>
  a.length === b.length && a.every((h, i) => h.peerId === b[i].peerId && h.range.start === b[i].range.start && h.range.end === b[i].range.end);

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

const hopsKey = (hops: readonly PrefixHop[]) => hops.map((h) => `${h.peerId}@${h.range.start}:${h.range.end}`).join('|');
const sequenceKey = (tokens: readonly number[], hops: readonly PrefixHop[]) => `${hopsKey(hops)}#${tokens.join(',')}`;

export class PrefixRegistry {
  // Insertion order is recency.
  private readonly entries = new Map<string, PrefixEntry>();
  /** Ids handed out by `idFor` whose keep has not settled, by hops and tokens. */
  private readonly pending = new Map<string, string>();
  private bytes = 0;
  private counts = { lookups: 0, hits: 0, misses: 0, reusedTokens: 0 };

  constructor(private readonly options: PrefixRegistryOptions = {}) {}

  /** The entry sharing the longest prefix with `prompt` on exactly these hops, if long enough. */
  match(prompt: readonly number[], hops: readonly PrefixHop[]): PrefixMatch | undefined {
    this.counts.lookups++;
    let best: PrefixMatch | undefined;
    for (const entry of this.entries.values()) {
      if (!sameHops(entry.hops, hops)) continue;
      const length = Math.min(commonPrefix(entry.tokens, prompt), prompt.length - 1);
      if (length >= (this.options.minTokens ?? 16) && length > (best?.length ?? 0)) best = { entry, length };
    }
    if (best) {
      this.entries.delete(best.entry.prefixId);
      this.entries.set(best.entry.prefixId, best.entry);
    }
    return best;
  }

  /** A fork from `match` worked on every hop (`reused` positions not sent) or failed on one (the entry is forgotten). */
  settle(match: PrefixMatch, reused: boolean): void {
    if (reused) {
      this.counts.hits++;
      this.counts.reusedTokens += match.length;
    } else {
      this.counts.misses++;
      this.forget(match.entry.prefixId);
    }
  }

  /**
   * The id to keep a finished session's `tokens` under on `hops`: that of a pending keep of
   * the same tokens, else of the longest entry they equal or extend (the keep replaces it),
   * else a new one. Call `settled` once the keep is done, whichever way.
   */
  idFor(tokens: readonly number[], hops: readonly PrefixHop[]): string {
    const key = sequenceKey(tokens, hops);
    let id = this.pending.get(key);
    if (id) return id;
    let best: PrefixEntry | undefined;
    for (const entry of this.entries.values()) {
      if (!sameHops(entry.hops, hops) || entry.tokens.length > tokens.length || commonPrefix(entry.tokens, tokens) !== entry.tokens.length) continue;
      if (entry.tokens.length > (best?.tokens.length ?? -1)) best = entry;
    }
    id = best?.prefixId ?? globalThis.crypto.randomUUID();
    this.pending.set(key, id);
    return id;
  }

  /** The keep `idFor` gave `prefixId` for is done (added or failed). */
  settled(tokens: readonly number[], hops: readonly PrefixHop[]): void {
    this.pending.delete(sequenceKey(tokens, hops));
  }

  /** Whether an entry on `hops` holds exactly `tokens` (a session that repeats it has nothing new to keep). */
  isHeld(tokens: readonly number[], hops: readonly PrefixHop[]): boolean {
    for (const entry of this.entries.values()) {
      if (sameHops(entry.hops, hops) && entry.tokens.length === tokens.length && commonPrefix(entry.tokens, tokens) === tokens.length) return true;
    }
    return false;
  }

  add(entry: PrefixEntry): void {
    this.forget(entry.prefixId);
    // An entry that extends an older one on the same hops supersedes it (kept under its id, it replaced it on the peers).
    for (const old of [...this.entries.values()]) {
      if (sameHops(old.hops, entry.hops) && old.tokens.length <= entry.tokens.length && commonPrefix(old.tokens, entry.tokens) === old.tokens.length) {
        this.forget(old.prefixId);
      }
    }
    this.entries.set(entry.prefixId, entry);
    this.bytes += entryBytes(entry);
    const maxEntries = this.options.maxEntries ?? 64;
    const maxBytes = this.options.maxBytes ?? 256 * 2 ** 20;
    for (const id of [...this.entries.keys()]) {
      if (this.entries.size <= maxEntries && this.bytes <= maxBytes) break;
      if (id !== entry.prefixId) this.forget(id);
    }
  }

  forget(prefixId: string): void {
    const entry = this.entries.get(prefixId);
    if (!entry) return;
    this.entries.delete(prefixId);
    this.bytes -= entryBytes(entry);
  }

  get size(): number {
    return this.entries.size;
  }

  stats() {
    return { entries: this.entries.size, inputBytes: this.bytes, ...this.counts };
  }
}

function entryBytes(entry: PrefixEntry): number {
  return entry.inputs.reduce((n, a) => n + a.data.byteLength, 0);
}
