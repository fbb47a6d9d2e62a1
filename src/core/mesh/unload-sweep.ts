/**
 * The unload sweep: a peer holds what the route needs, not every range it was ever given. The
 * sweep keeps the ranges of the current plan generation and of the one before (a generation:
 * a change of the planned ranges — the plan over the peers that are up, the last ready plan
 * while it serves, and a quarantined peer's own ranges in the quarantine-blind plan), a range
 * a session leases, a range loading (or warming up) or reserved for a repair about to lease
 * it. Everything else on a peer is unloaded:
 * - under churn, at once: each time the mesh changes (checked in a microtask after the change,
 *   never on a timer of its own), and when a range's last lease closes — so peers hold at most
 *   the ranges of the current and the previous plan, plus what sessions lease (a session on a
 *   range of neither moves to the current plan at its next step: `offPlan`);
 * - in a quiet mesh, once a range outside the current generation has stayed unused — no lease
 *   opened or closed on it, no change to the mesh — for the grace period.
 * A quarantined peer's ranges wait for its quarantine to end (a paused process does not answer
 * `unload`, and a peer that does not answer is never asked again). Without a plan nothing is
 * unloaded: it may be needed when peers come back.
 */
import type { LayerRange } from '../model/types.ts';
import type { Clock } from '../runtime/clock.ts';
import { HeldRangeMap, type HeldRange } from './held-range.ts';
import type { MeshPeer, Membership } from './membership.ts';
import { HEAD_PEER_ID } from './plan-route.ts';
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
  /** The planned ranges of the current generation and of the one before. */
  private keptNow = new HeldRangeMap<true>();
  private keptBefore = new HeldRangeMap<true>();
  private followQueued = false;

  /** `planned()`: the held ranges the plans use now, or undefined when there is no plan. */
  constructor(
    private readonly clock: Clock,
    private readonly graceMs: number,
    private readonly membership: Membership,
    private readonly loader: RangeLoader,
    private readonly planned: () => HeldRangeMap<true> | undefined,
  ) {}

  /** Open leases on `held` (sessions routed or repaired onto it). */
  leases(held: HeldRange): number {
    return this.leased.get(held) ?? 0;
  }

  /** `held` was used now (it loaded). */
  touch(held: HeldRange): void {
    this.lastUsed.set(held, this.clock.now());
  }

  /** `held` was unloaded. */
  forget(held: HeldRange): void {
    this.lastUsed.delete(held);
  }

  /** The plan generation (bumped at each change of the planned ranges). */
  get planGeneration(): number {
    return this.generation;
  }

  /** The planned ranges of the current generation and of the one before (what the sweep keeps unleased). */
  recentPlans(): readonly [HeldRange[], HeldRange[]] {
    return [[...this.keptNow.keys()], [...this.keptBefore.keys()]];
  }

  /** Whether `held` is in the plans now, in the current generation's or in the one before's. */
  wanted(held: HeldRange): boolean {
    return this.keptNow.has(held) || this.keptBefore.has(held) || (this.planned()?.has(held) ?? false);
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

  /**
   * A lease on `held` opened — or a repair reserved it while it loads, until its lease is
   * taken; call the returned function when it closes.
   */
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
   * `held`'s last lease closed: a range in neither recent plan goes now (its peer up and not
   * quarantined) — but the head's own (a `--verify` witness range, checked again and again)
   * waits for the next plan change or the grace period.
   */
  private unloadIfDue(held: HeldRange): void {
    if (held.peerId === HEAD_PEER_ID || this.loader.isLoading(held) || this.leased.has(held) || !this.planned() || this.wanted(held)) return;
    const peer = this.membership.get(held.peerId);
    if (peer && !peer.quarantine && this.loader.unloads(peer)) void this.loader.unload(peer, held.range);
  }

  /** After a change: a new generation when the planned ranges moved; then unload what neither recent plan uses. */
  private followPlan(): void {
    const used = this.planned();
    if (!used) return;
    const key = [...used.keys()].map((h) => `${h.peerId}@${h.range.start}:${h.range.end}`).sort().join(' ');
    if (key !== this.plannedKey) {
      this.plannedKey = key;
      this.generation++;
      this.keptBefore = this.keptNow;
      this.keptNow = used;
    }
    const due: [MeshPeer, LayerRange][] = [];
    for (const peer of this.membership.peers) {
      if (peer.quarantine || !this.loader.unloads(peer)) continue;
      for (const range of peer.ranges) {
        const held = { peerId: peer.id, range };
        if (!this.wanted(held) && !this.leased.has(held) && !this.loader.isLoading(held)) due.push([peer, range]);
      }
    }
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
      if (peer.quarantine || !this.loader.unloads(peer)) continue;
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
