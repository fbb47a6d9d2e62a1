/**
 * Prefix reuse for one session (issue 17): it starts from the longest prefix entry every hop
 * of its route holds — each hop forks the session's KV from it (a copy: the entry is never
 * written) and its history gets the entry's recorded inputs, so a later cache miss replays as
 * usual — and, when it finished with every hop holding each of its positions, it leaves its
 * KV behind as a new entry (the peers keep it on `release`; the head's PrefixRegistry records
 * what each hop holds).
 */
import type { Activations } from '../runtime/shard-executor.ts';
import type { Hop, KeepPrefix } from './hop.ts';
import type { PrefixRegistry } from './prefix-registry.ts';

/** The first `tokens` positions of a block (a view). */
function firstPositions(a: Activations, tokens: number): Activations {
  return { ...a, data: a.data.subarray(0, tokens * a.hiddenSize) as Float32Array | Uint16Array, tokens };
}

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
    this.registry.settle(match, reused);
    if (!reused) return 0;
    hops.forEach((hop, i) => hop.history.record(0, firstPositions(match.entry.inputs[i], match.length)));
    return match.length;
  }

  /**
   * What a finished session keeps: its `sequence`'s KV, when every hop holds exactly those
   * positions and no entry holds that sequence already — under the id of the entry it
   * extends, if any, which it then replaces (PrefixRegistry.idFor). Settle it with `kept`.
   */
  toKeep(finished: boolean, sequence: readonly number[], hops: readonly Hop[]): KeepPrefix | undefined {
    const length = sequence.length;
    if (!finished || length === 0 || hops.length === 0 || !hops.every((h) => !h.stale && h.history.length === length)) return undefined;
    if (this.registry.isHeld(sequence, hopsOf(hops))) return undefined;
    return { prefixId: this.registry.idFor(sequence, hopsOf(hops)), length };
  }

  /** `keep` is settled: `ok` when every hop kept it on its peer (the registry remembers the entry). */
  kept(keep: KeepPrefix, sequence: readonly number[], hops: readonly Hop[], ok = true): void {
    const held = hopsOf(hops);
    if (ok) this.registry.add({ prefixId: keep.prefixId, tokens: sequence.slice(), hops: held, inputs: hops.map((h) => h.history.replay()) });
    else this.registry.forget(keep.prefixId); // what a hop may still hold under it is no longer the registry's entry
    this.registry.settled(sequence, held);
  }
}
