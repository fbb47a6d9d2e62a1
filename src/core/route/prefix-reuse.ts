/**
 * Prefix reuse for one session (issue 17): it starts from the longest prefix entry every hop
 * of its route holds — each hop forks the session's KV from it (a copy: the entry is never
 * written) and its history gets the entry's recorded inputs, so a later cache miss replays as
 * usual — and, when it finished with every hop holding each of its positions, it leaves its
 * KV behind as a new entry (the peers keep it on `release`; the head's PrefixRegistry records
 * what each hop holds). An entry that shares its first positions with another names it as its
 * parent (issue 27, protocol 3.3): the peers keep only the rest, and so does the registry.
 */
import type { Hop, KeepPrefix } from './hop.ts';
import type { PrefixRegistry } from './prefix-registry.ts';

const hopsOf = (hops: readonly Hop[]) => hops.map((h) => ({ peerId: h.peerId, range: h.range }));

export class PrefixReuse {
  constructor(
    private readonly registry: PrefixRegistry,
    /** How long a fork may take (it is a copy on the peer); past it the session starts cold. */
    private readonly forkTimeoutMs: number,
  ) {}

  /**
   * Fork every hop from the entry sharing the longest prefix with `promptIds`. Returns the
   * positions reused (0: none matched, or a hop no longer held the entry and the session
   * starts cold; the entry is forgotten then).
   */
  async start(hops: readonly Hop[], promptIds: readonly number[], signal: AbortSignal): Promise<number> {
    if (hops.length === 0) return 0;
    const match = this.registry.match(promptIds, hopsOf(hops));
    if (!match) return 0;
    const forked = await Promise.all(hops.map((hop) => hop.fork(match.entry.prefixId, match.length, this.forkTimeoutMs, signal)));
    signal.throwIfAborted();
    const reused = forked.every(Boolean);
    // The recorded inputs are read before settling: a miss forgets the entry.
    const inputs = reused ? hops.map((_, i) => this.registry.inputsOf(match.entry, i, match.length)) : [];
    this.registry.settle(match, reused);
    if (!reused) return 0;
    hops.forEach((hop, i) => {
      let at = 0;
      for (const block of inputs[i]) {
        hop.history.record(at, block);
        at += block.tokens;
      }
    });
    return match.length;
  }

  /**
   * What a finished session keeps: its `sequence`'s KV, when every hop holds exactly those
   * positions and no entry holds that sequence already — under the id of the entry it
   * extends, if any, which it then replaces, or as a child of the entry it shares most with
   * (PrefixRegistry.keepFor). Settle it with `kept`. A hop whose peer predates 3.3 is sent
   * the keep without its parent (`forHop`).
   */
  toKeep(finished: boolean, sequence: readonly number[], hops: readonly Hop[]): KeepPrefix | undefined {
    const length = sequence.length;
    if (!finished || length === 0 || hops.length === 0 || !hops.every((h) => !h.stale && h.history.length === length)) return undefined;
    if (this.registry.isHeld(sequence, hopsOf(hops))) return undefined;
    return this.registry.keepFor(sequence, hopsOf(hops));
  }

  /** The keep as one hop's peer is sent it: without a parent for a peer below protocol 3.3 (it keeps a whole copy). */
  static forHop(keep: KeepPrefix, hop: Hop): KeepPrefix {
    if (!keep.parent || hop.lease.prefixTree !== false) return keep;
    return { prefixId: keep.prefixId, length: keep.length };
  }

  /** `keep` is settled: `ok` when every hop kept it on its peer (the registry remembers the entry). */
  kept(keep: KeepPrefix, sequence: readonly number[], hops: readonly Hop[], ok = true): void {
    const held = hopsOf(hops);
    if (ok) this.registry.add(keep, sequence, held, hops.map((h) => h.history.replay()));
    else this.registry.forget(keep.prefixId); // what a hop may still hold under it is no longer the registry's entry
    this.registry.settled(sequence, held);
  }
}
