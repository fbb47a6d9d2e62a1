/**
 * The unload sweep: a peer holds what the route needs, not every range it was ever given. A
 * range that no plan uses any more (neither the plan over the peers that are up, nor the one
 * that ignores quarantine, nor the last ready plan while it serves), that no session holds a
 * lease on and that is not loading (or warming up), is unloaded from its peer:
 * - under churn, by plan generation: each time the set of planned ranges changes, a range that
 *   was already unused at the generation before goes — so peers hold at most the ranges of the
 *   current and the previous plan, however often the mesh changes (a range survives one plan
 *   change unused: a peer that flaps back finds its ranges still loaded);
 * - in a quiet mesh, once it has stayed unused — no lease opened or closed on it, no change to
 *   the mesh — for the grace period.
 * The generation check runs in a microtask after the change, never on a timer of its own.
 * Without a plan nothing is unloaded: it may be needed when peers come back.
 */
import type { LayerRange } from '../model/types.ts';
import type { Clock } from '../runtime/clock.ts';
import { HeldRangeMap, type HeldRange } from './held-range.ts';
import type { MeshPeer, Membership } from './membership.ts';
import type { RangeLoader } from './range-loader.ts';

export const DEFAULT_UNLOAD_GRACE_MS = 5000;

export class UnloadSweep {
  /** Open leases per held range: a leased range is in use whatever the plan says. */
  private readonly leased = new HeldRangeMap<number>();
  /** When each held range was last in use: loaded, leased or released, or in a plan at a sweep. */
  private readonly lastUsed = new HeldRangeMap<number>();
  private cancelSweep: (() => void) | undefined;
  private sweepAt: number | undefined;
  /** Plan generations: bumped when the set of planned ranges changes. */
  private generation = 0;
  private plannedKey: string | undefined;
  /** The generation at which each unused held range was first seen unused. */
  private readonly unusedSince = new HeldRangeMap<number>();
  private followQueued = false;

  /** `planned()`: the held ranges the plans use now, or undefined when there is no plan. */
  constructor(
    private readonly clock: Clock,
    private readonly graceMs: number,
    private readonly membership: Membership,
    private readonly loader: RangeLoader,
    private readonly planned: () => HeldRangeMap<true> | undefined,
  ) {}

  /** `held` was used now (it loaded). */
  touch(held: HeldRange): void {
    this.lastUsed.set(held, this.clock.now());
  }

  /** `held` was unloaded. */
  forget(held: HeldRange): void {
    this.lastUsed.delete(held);
    this.unusedSince.delete(held);
  }

  /**
   * The mesh changed or another plan became ready: in a microtask (so a change made inside the
   * loader's bookkeeping is complete), see whether the planned ranges moved; if so, unload
   * what was unused already at the generation before.
   */
  planMayHaveMoved(): void {
    if (this.followQueued) return;
    this.followQueued = true;
    queueMicrotask(() => {
      this.followQueued = false;
      this.followPlan();
    });
  }

  /** A lease on `held` opened; call the returned function when it closes. */
  leaseOpened(held: HeldRange): () => void {
    this.leased.set(held, (this.leased.get(held) ?? 0) + 1);
    this.touch(held);
    return () => {
      this.touch(held);
      const left = (this.leased.get(held) ?? 1) - 1;
      if (left > 0) return void this.leased.set(held, left);
      this.leased.delete(held);
      this.schedule();
      this.unloadIfDue(held);
    };
  }

  /**
   * Look for unused ranges in `ms` (the grace period by default), unless a sweep is already due
   * sooner. A pending sweep is not pushed back by new activity — under steady traffic, where a
   * lease closes every moment, a stale range must still go — the sweep itself checks that each
   * range it unloads was idle for the whole grace period, and comes back for those not yet due.
   */
  schedule(ms = this.graceMs): void {
    const at = this.clock.now() + ms;
    if (this.cancelSweep && this.sweepAt !== undefined && this.sweepAt <= at) return;
    this.cancelSweep?.();
    this.sweepAt = at;
    this.cancelSweep = this.clock.setTimeout(() => {
      this.cancelSweep = undefined;
      this.sweepAt = undefined;
      this.sweep();
    }, ms);
  }

  /**
   * `held`'s last lease closed: a range no plan used since a generation before this one goes
   * now; one no plan uses and not yet marked is marked, to go at the next plan change.
   */
  private unloadIfDue(held: HeldRange): void {
    if (this.loader.isLoading(held)) return;
    const since = this.unusedSince.get(held);
    if (since === undefined) {
      // Loaded for a session's repair (or a witness) and in no plan: it goes at the next plan change.
      const used = this.planned();
      if (used && !used.has(held) && this.generation > 0) this.unusedSince.set(held, this.generation);
      return;
    }
    if (since >= this.generation) return;
    // The plan may have taken it back in this turn (its plan-change microtask has not run yet).
    if (this.planned()?.has(held)) return void this.unusedSince.delete(held);
    const peer = this.membership.get(held.peerId);
    if (peer && this.loader.unloads(peer)) void this.loader.unload(peer, held.range);
  }

  private followPlan(): void {
    const used = this.planned();
    if (!used) return;
    const key = [...used.keys()].map((h) => `${h.peerId}@${h.range.start}:${h.range.end}`).sort().join(' ');
    if (key === this.plannedKey) return;
    this.plannedKey = key;
    const generation = ++this.generation;
    const due: [MeshPeer, LayerRange][] = [];
    for (const peer of this.membership.peers) {
      if (!this.loader.unloads(peer)) continue;
      for (const range of peer.ranges) {
        const held = { peerId: peer.id, range };
        if (used.has(held) || this.loader.isLoading(held)) {
          this.unusedSince.delete(held);
          continue;
        }
        // A leased range is marked too, and goes when its last lease closes if it is due by then.
        const since = this.unusedSince.get(held);
        if (since === undefined) this.unusedSince.set(held, generation);
        else if (since < generation && !this.leased.has(held)) due.push([peer, range]);
      }
    }
    this.unusedSince.retainPeers((id) => this.membership.get(id) !== undefined);
    for (const [peer, range] of due) void this.loader.unload(peer, range);
  }

  /** Unload every range that is unused and was idle for the grace period; come back for the rest. */
  private sweep(): void {
    const now = this.clock.now();
    const used = this.planned();
    if (!used) return;
    const due: [MeshPeer, LayerRange][] = [];
    let nextDue = Infinity;
    for (const peer of this.membership.peers) {
      if (!this.loader.unloads(peer)) continue;
      for (const range of peer.ranges) {
        const held = { peerId: peer.id, range };
        if (used.has(held) || this.leased.has(held) || this.loader.isLoading(held)) {
          this.lastUsed.set(held, now);
          continue;
        }
        const idleSince = Math.max(this.lastUsed.get(held) ?? now, this.membership.changedAt);
        if (now - idleSince >= this.graceMs) due.push([peer, range]);
        else nextDue = Math.min(nextDue, idleSince + this.graceMs);
      }
    }
    this.lastUsed.retainPeers((id) => this.membership.get(id) !== undefined);
    for (const [peer, range] of due) void this.loader.unload(peer, range);
    if (nextDue < Infinity) this.schedule(Math.max(1, nextDue - now));
  }
}
