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
 * entry its tokens equal or extend (`keepFor`), so the peer's keep replaces that entry (a
 * peer keeps one entry per id) instead of adding a copy; a session whose tokens an entry
 * already holds (equal, or a prefix of it) keeps nothing (`isHeld`); sessions finishing at
 * once with the same tokens share one pending keep.
 *
 * The entries form a tree per hop set (a radix tree over token sequences, as SGLang's, without
 * splitting nodes): a new sequence that shares `n ≥ minTokens` positions with an entry (the one
 * sharing most) becomes its child, holding only its tail — tokens and, per hop, recorded
 * inputs of positions [n, length) — and the peers are asked to keep only that tail
 * (`keepPrefix.parent`, protocol 3.3). Two answers to one system prompt hold the prompt once,
 * so memory follows the distinct tokens. Forgetting an entry forgets its descendants (they
 * need its positions); using one marks its ancestors used after it, so the least recently used
 * entry the limits evict is always a leaf, and a parent goes only with its children.
 */
import type { LayerRange } from '../model/types.ts';
import type { Activations } from '../runtime/shard-executor.ts';

export interface PrefixHop {
  readonly peerId: string;
  readonly range: LayerRange;
}

/** An entry as the Route Session sees it: its id and length (what it holds lives in the registry). */
export interface PrefixEntry {
  readonly prefixId: string;
  readonly length: number;
}

export interface PrefixMatch {
  readonly entry: PrefixEntry;
  /** Positions to reuse: the common prefix, at least one prompt token left to feed. */
  readonly length: number;
}

/** What a finished session keeps: its KV under `prefixId`, only the positions after `parent.length` when a parent is named. */
export interface PrefixKeep {
  readonly prefixId: string;
  readonly length: number;
  readonly parent?: { readonly prefixId: string; readonly length: number };
}

export interface PrefixRegistryOptions {
  /** Fewest tokens worth a fork — and worth sharing with a parent (default 16). */
  readonly minTokens?: number;
  /** Most entries remembered (default 64). */
  readonly maxEntries?: number;
  /** Most bytes of recorded inputs held (default 256 MiB). */
  readonly maxBytes?: number;
  /** Called for each entry forgotten (evicted, a failed fork, a keep whose parent went), with the hops that may hold it: the head tells those peers (`forget`, 3.5). */
  readonly onForget?: (prefixId: string, hops: readonly PrefixHop[]) => void;
}

interface Node {
  readonly prefixId: string;
  readonly hops: readonly PrefixHop[];
  parent: Node | undefined;
  /** Positions [0, shared) are the parent's. */
  shared: number;
  /** Tokens of positions [shared, length). */
  tail: readonly number[];
  /** Per hop, its inputs for positions [shared, length) ([1, length - shared, hidden]). */
  inputs: readonly Activations[];
  readonly children: Set<Node>;
}

const lengthOf = (node: Node) => node.shared + node.tail.length;

const hopsKey = (hops: readonly PrefixHop[]) => hops.map((h) => `${h.peerId}@${h.range.start}:${h.range.end}`).join('|');
const sequenceKey = (tokens: readonly number[], hops: readonly PrefixHop[]) => `${hopsKey(hops)}#${tokens.join(',')}`;

/** Positions [from, to) of a block (a view). */
function positions(a: Activations, from: number, to: number): Activations {
  return { ...a, data: a.data.subarray(from * a.hiddenSize, to * a.hiddenSize) as Float32Array | Uint16Array, tokens: to - from };
}

export class PrefixRegistry {
  // Insertion order is recency: a used node is re-inserted, then its ancestors.
  private readonly nodes = new Map<string, Node>();
  /** Keeps handed out by `keepFor` that have not settled, by hops and tokens. */
  private readonly pending = new Map<string, PrefixKeep>();
  private bytes = 0;
  private counts = { lookups: 0, hits: 0, misses: 0, reusedTokens: 0 };

  constructor(private readonly options: PrefixRegistryOptions = {}) {}

  private get minTokens(): number {
    return this.options.minTokens ?? 16;
  }

  /** The entry sharing the longest prefix with `prompt` on exactly these hops, if long enough. */
  match(prompt: readonly number[], hops: readonly PrefixHop[]): PrefixMatch | undefined {
    this.counts.lookups++;
    const best = this.closest(prompt, hops);
    const length = best ? Math.min(best.common, prompt.length - 1) : 0;
    if (!best || length < this.minTokens) return undefined;
    this.touch(best.node);
    return { entry: { prefixId: best.node.prefixId, length: lengthOf(best.node) }, length };
  }

  /**
   * Hop `hop`'s recorded inputs for the first `length` positions of `entry`: views of its
   * ancestors' tails and its own, in position order (recorded as they are: no copy).
   */
  inputsOf(entry: PrefixEntry, hop: number, length: number): Activations[] {
    const node = this.nodes.get(entry.prefixId);
    if (!node || length > lengthOf(node)) throw new RangeError(`no prefix entry ${entry.prefixId} of ${length} positions`);
    const blocks: Activations[] = [];
    let limit = length;
    for (let n: Node | undefined = node; n && limit > 0; n = n.parent) {
      if (limit <= n.shared) continue;
      blocks.unshift(positions(n.inputs[hop], 0, limit - n.shared));
      limit = n.shared;
    }
    return blocks;
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
   * What to keep a finished session's `tokens` under on `hops`: a pending keep of the same
   * tokens; else the id of the longest entry they extend (the keep replaces it, under its
   * parent); else a new id, as a child of the entry sharing most positions (at least
   * `minTokens`), if any. Call `settled` once the keep is done, whichever way.
   */
  keepFor(tokens: readonly number[], hops: readonly PrefixHop[]): PrefixKeep {
    const key = sequenceKey(tokens, hops);
    const pending = this.pending.get(key);
    if (pending) return pending;
    let extended: Node | undefined;
    let closest: { node: Node; common: number } | undefined;
    for (const node of this.nodes.values()) {
      if (hopsKey(node.hops) !== hopsKey(hops)) continue;
      const common = this.common(node, tokens);
      if (common === lengthOf(node) && common < tokens.length && common > (extended ? lengthOf(extended) : -1)) extended = node;
      if (common > (closest?.common ?? 0)) closest = { node, common };
    }
    closest = closest && this.holder(closest);
    const parentOf = (node: Node | undefined, shared: number) => (node ? { parent: { prefixId: node.prefixId, length: shared } } : {});
    let keep: PrefixKeep;
    // Replace the entry the tokens extend, unless another shares more of them (then a child of that one holds less).
    if (extended && lengthOf(extended) >= (closest?.common ?? 0)) keep = { prefixId: extended.prefixId, length: tokens.length, ...parentOf(extended.parent, extended.shared) };
    else if (closest && closest.common >= this.minTokens) keep = { prefixId: globalThis.crypto.randomUUID(), length: tokens.length, ...parentOf(closest.node, closest.common) };
    else keep = { prefixId: globalThis.crypto.randomUUID(), length: tokens.length };
    this.pending.set(key, keep);
    return keep;
  }

  /** The keep `keepFor` gave for these tokens is done (added or failed). */
  settled(tokens: readonly number[], hops: readonly PrefixHop[]): void {
    this.pending.delete(sequenceKey(tokens, hops));
  }

  /** Whether an entry on `hops` holds `tokens` (equal to, or a prefix of, its sequence): a session that repeats it has nothing new to keep. */
  isHeld(tokens: readonly number[], hops: readonly PrefixHop[]): boolean {
    for (const node of this.nodes.values()) {
      if (hopsKey(node.hops) === hopsKey(hops) && this.common(node, tokens) === tokens.length) return true;
    }
    return false;
  }

  /**
   * Register what `keep` kept: the session's `tokens` and, per hop, its recorded inputs for
   * all of them ([1, tokens.length, hidden]; only the tail after the parent's positions is
   * copied and held). A keep whose parent was forgotten meanwhile is not registered (what the
   * peers hold under it can no longer be forked from here).
   */
  add(keep: PrefixKeep, tokens: readonly number[], hops: readonly PrefixHop[], inputs: readonly Activations[]): void {
    const parent = keep.parent && this.nodes.get(keep.parent.prefixId);
    if (keep.parent && (!parent || lengthOf(parent) < keep.parent.length)) {
      if (this.nodes.has(keep.prefixId)) this.forget(keep.prefixId);
      else this.options.onForget?.(keep.prefixId, hops); // the peers kept it; nothing here will fork from it
      return;
    }
    const shared = parent ? keep.parent!.length : 0;
    const tail = tokens.slice(shared);
    const tailInputs = inputs.map((a) => ({ ...positions(a, shared, tokens.length), data: a.data.slice(shared * a.hiddenSize, tokens.length * a.hiddenSize) }) as Activations);
    const old = this.nodes.get(keep.prefixId);
    let node: Node;
    if (old) {
      // The keep replaced this entry on the peers (its tokens extend it): same node, longer tail; its children still fit.
      this.bytes -= inputBytes(old);
      old.parent?.children.delete(old);
      old.parent = parent;
      old.shared = shared;
      old.tail = tail;
      old.inputs = tailInputs;
      node = old;
    } else {
      node = { prefixId: keep.prefixId, hops, parent, shared, tail, inputs: tailInputs, children: new Set() };
      this.nodes.set(node.prefixId, node);
    }
    parent?.children.add(node);
    this.bytes += inputBytes(node);
    this.touch(node);
    const kept = new Set<Node>();
    for (let n: Node | undefined = node; n; n = n.parent) kept.add(n);
    const maxEntries = this.options.maxEntries ?? 64;
    const maxBytes = this.options.maxBytes ?? 256 * 2 ** 20;
    for (const other of [...this.nodes.values()]) {
      if (this.nodes.size <= maxEntries && this.bytes <= maxBytes) break;
      if (!kept.has(other) && this.nodes.get(other.prefixId) === other) this.forget(other.prefixId);
    }
  }

  /** Forget an entry and its descendants. */
  forget(prefixId: string): void {
    const node = this.nodes.get(prefixId);
    if (!node) return;
    for (const child of [...node.children]) this.forget(child.prefixId);
    node.parent?.children.delete(node);
    this.nodes.delete(prefixId);
    this.bytes -= inputBytes(node);
    this.options.onForget?.(prefixId, node.hops);
  }

  get size(): number {
    return this.nodes.size;
  }

  stats() {
    return { entries: this.nodes.size, inputBytes: this.bytes, ...this.counts };
  }

  /** The entry on `hops` sharing most positions with `tokens`. */
  private closest(tokens: readonly number[], hops: readonly PrefixHop[]): { node: Node; common: number } | undefined {
    let best: { node: Node; common: number } | undefined;
    const key = hopsKey(hops);
    for (const node of this.nodes.values()) {
      if (hopsKey(node.hops) !== key) continue;
      const common = this.common(node, tokens);
      if (common > (best?.common ?? 0)) best = { node, common };
    }
    return best && this.holder(best);
  }

  /**
   * The entry whose own tail holds the last of `common` positions, not a descendant that only
   * inherits them: a fork from it or a child of it needs fewer entries (and survives the
   * eviction of those descendants).
   */
  private holder(best: { node: Node; common: number }): { node: Node; common: number } {
    let node = best.node;
    while (node.parent && best.common <= node.shared) node = node.parent;
    return { node, common: best.common };
  }

  /** Positions `node`'s sequence and `tokens` have in common from the start. */
  private common(node: Node, tokens: readonly number[]): number {
    if (node.parent) {
      const upTo = this.common(node.parent, tokens);
      if (upTo < node.shared) return upTo;
    }
    const n = Math.min(node.tail.length, tokens.length - node.shared);
    let i = 0;
    while (i < n && node.tail[i] === tokens[node.shared + i]) i++;
    return node.shared + i;
  }

  /** Mark `node` used, then its ancestors (so they stay more recent than any descendant). */
  private touch(node: Node): void {
    for (let n: Node | undefined = node; n; n = n.parent) {
      this.nodes.delete(n.prefixId);
      this.nodes.set(n.prefixId, n);
    }
  }
}

function inputBytes(node: Node): number {
  return node.inputs.reduce((n, a) => n + a.data.byteLength, 0);
}
