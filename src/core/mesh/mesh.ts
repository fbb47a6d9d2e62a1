/**
 * Mesh: the head's view of the peers serving its model, and the RouteProvider that Route
 * Sessions draw hops from. Routes come from the pure planner over the peers that are up and
 * not quarantined (mesh-planner.ts); a route only uses peers that reported `ready` for their
 * range: a range is loaded on demand (`assign` → `ready`) and remembered, and a peer that does
 * not get ready in time is quarantined and the plan made again without it (range-loader.ts).
 * A range serves only once it answered a warm-up frame; while the current plan's ranges load
 * and warm up, requests take the last plan that was ready, if its peers still serve it, so a
 * peer that says ready and then stays silent costs no request — only a cold mesh waits (the
 * serving plan, `servingPlan`, is what `/health` reports).
 * A peer a session reports as hung or faulty is quarantined with a bounded back-off. A peer
 * whose link closes leaves the mesh (membership.ts). Each lease handed out is a LeasedLink over
 * the peer's link. A range that no plan uses any more and that no session holds a lease on is
 * unloaded from its peer once a second plan change passed without it, or once it has stayed so
 * for `unloadGraceMs` (unload-sweep.ts): a peer holds what the route needs — at most the
 * ranges of the current and the previous plan under churn — not every range it was ever given.
 */
import { CHAIN_LANES_MINOR, CHAIN_MINOR, POSITION_RULE_MINOR, PREFIX_TREE_MINOR, type WireWeights } from '../../shared/protocol.ts';
import type { LayerRange } from '../model/types.ts';
import { untilAborted } from '../runtime/abort.ts';
import { systemClock, type Clock } from '../runtime/clock.ts';
import { BatchingLink } from './batching-link.ts';
import { HeldRangeMap, rangeText, sameRange, type HeldRange } from './held-range.ts';
import { LeasedLink, revokeLeases } from './leased-link.ts';
import { Membership, type MeshPeer, type MeshPeerInit } from './membership.ts';
import type { MeshModel } from './mesh-model.ts';
import { MeshPlanner } from './mesh-planner.ts';
import { RouteUnavailableError } from './plan-error.ts';
import { HEAD_PEER_ID, type PlanOptions, type RoutePlan } from './plan-route.ts';
import { DEFAULT_QUARANTINE, type QuarantinePolicy } from './quarantine.ts';
import { DEFAULT_READY_TIMEOUT_MS, RangeLoader } from './range-loader.ts';
import type { HopFault, HopLease, RouteProvider, VerifierSource } from './route-provider.ts';
import { DEFAULT_UNLOAD_GRACE_MS, UnloadSweep } from './unload-sweep.ts';

export type { MeshModel } from './mesh-model.ts';
export type { MeshPeer, MeshPeerInit } from './membership.ts';

export interface MeshOptions extends PlanOptions {
  /** Time and timers (quarantine back-off, ready deadlines); the system clock by default. */
  readonly clock?: Clock;
  readonly quarantine?: QuarantinePolicy;
  /** How long a peer may take to answer `assign` with `ready` before it is dropped from the plan (default 30 s). */
  readonly readyTimeoutMs?: number;
  /** The cold-start deadline of a range's warm-up frame (range-warm-up.ts; default 60 s). */
  readonly warmUpTimeoutMs?: number;
  /** `--hop-timeout`: the deadline of the warm-up's decode frame, the ceiling of every frame's. */
  readonly hopTimeoutMs?: number;
  /**
   * Send warm-up frames (default true). Off, a range serves once it is `ready` and its first
   * frame has the ceiling for deadline (tests that count every frame a peer sees turn it off).
   */
  readonly warmUpFrames?: boolean;
  /**
   * Fold concurrent sessions' decode steps to one peer and range into batched frames
   * (BatchingLink; default true). Off: every step travels alone.
   */
  readonly batching?: boolean;
  /**
   * A range unused this long — in neither plan, no lease opened or closed on it, and no change
   * to the mesh — is unloaded from its peer (default 5 s).
   */
  readonly unloadGraceMs?: number;
}

/** A loaded range and what keeps it (Mesh.rangeHolds). */
export interface RangeHold {
  readonly peerId: string;
  readonly range: LayerRange;
  /** In the plan over the peers that are up and not quarantined. */
  readonly current: boolean;
  /** In that plan or the quarantine-blind one. */
  readonly planned: boolean;
  /** In the last ready plan while it is usable. */
  readonly lastReady: boolean;
  readonly leases: number;
  readonly loading: boolean;
  readonly quarantined: boolean;
  /** Why its peer is quarantined. */
  readonly quarantine?: string;
}

export class Mesh implements RouteProvider, VerifierSource {
  private readonly clock: Clock;
  private readonly membership: Membership;
  private readonly planner: MeshPlanner;
  private readonly loader: RangeLoader;
  private readonly sweep: UnloadSweep;
  /** The last plan whose every range was warm: requests take it while a newer plan warms up. */
  private lastReady: RoutePlan | undefined;

  constructor(
    readonly model: MeshModel,
    private readonly options: MeshOptions,
  ) {
    const clock = (this.clock = options.clock ?? systemClock);
    this.membership = new Membership(clock, options.quarantine ?? DEFAULT_QUARANTINE, () => {
      this.loader?.forgetDeparted();
      this.sweep?.schedule(); // the plan may have moved
      this.sweep?.planMayHaveMoved();
    });
    this.planner = new MeshPlanner(model, options, this.membership, clock);
    const times = { readyTimeoutMs: options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS, warmUpTimeoutMs: options.warmUpTimeoutMs, hopTimeoutMs: options.hopTimeoutMs, warmUpFrames: options.warmUpFrames };
    this.loader = new RangeLoader(model, this.membership, clock, times, {
      loaded: (held) => this.sweep.touch(held),
      unloaded: (held) => this.sweep.forget(held),
    });
    this.sweep = new UnloadSweep(clock, options.unloadGraceMs ?? DEFAULT_UNLOAD_GRACE_MS, this.membership, this.loader, () => this.plannedRanges());
  }

  /**
   * Add a peer (or the head, id 'head'). It leaves when its link closes. An id already in the
   * mesh is refused with ProtocolError('peer_id_taken'): call `vacate` first.
   */
  addPeer(init: MeshPeerInit): MeshPeer {
    return this.membership.add(init, this.options.batching === false ? init.link : new BatchingLink(init.link));
  }

  removePeer(id: string, reason = 'removed from the mesh'): void {
    this.membership.remove(id, reason);
  }

  /**
   * Make `id` free for a newcomer. No holder: nothing to do. A holder whose link answers a
   * ping within `pingTimeoutMs` keeps the id and keeps serving: the newcomer is refused with
   * ProtocolError('peer_id_taken'). A holder that does not answer (its socket died without
   * closing, its process hangs) is removed, so a restarted peer takes its id over. The id
   * 'head' is never free. Resolves with whether a silent holder was removed.
   */
  vacate(id: string, pingTimeoutMs: number): Promise<boolean> {
    return this.membership.vacate(id, pingTimeoutMs);
  }

  get peers(): readonly MeshPeer[] {
    return this.membership.peers;
  }

  /** Non-head peers that joined. */
  get remotePeerCount(): number {
    return this.membership.remotePeerCount;
  }

  onChange(listener: () => void): () => void {
    return this.membership.onChange(listener);
  }

  /** See MeshPlanner.plan: the current plan, or RouteUnavailableError naming what is missing. */
  plan(): RoutePlan {
    return this.planner.plan();
  }

  /** True when the plan succeeds and every hop's range is loaded and warm on its peer. */
  routeReady(): boolean {
    try {
      return this.plan().hops.every((hop) => this.loader.holds(hop));
    } catch {
      return false;
    }
  }

  /**
   * The plan a request would be served by now: the current plan when its every range is warm,
   * else the last plan that was, while its peers are up, not quarantined and hold it warm.
   * RouteUnavailableError when there is none (the planner's reason, or that layers warm up).
   */
  servingPlan(): RoutePlan {
    const plan = this.plan();
    if (plan.hops.every((hop) => this.loader.holds(hop))) return plan;
    const last = this.usableLastReady();
    if (last) return last;
    const cold = plan.hops.filter((hop) => !this.loader.holds(hop)).map((h) => `${h.peerId} ${rangeText(h.range)}`);
    throw new RouteUnavailableError(`layers are loading or warming up (${cold.join(', ')})`);
  }

  /**
   * Each loaded range and what keeps it: in the current plan, the quarantine-blind plan, the
   * last ready plan; its open leases; loading. Diagnostics (the chaos soak logs it).
   */
  rangeHolds(): RangeHold[] {
    let current: RoutePlan | undefined;
    try {
      current = this.plan();
    } catch {
      current = undefined;
    }
    const planned = this.planner.planned();
    const last = this.usableLastReady();
    const inPlan = (plan: RoutePlan | undefined, peerId: string, range: LayerRange) => plan?.hops.some((h) => h.peerId === peerId && sameRange(h.range, range)) ?? false;
    return this.peers.flatMap((peer) =>
      peer.ranges.map((range) => {
        const held = { peerId: peer.id, range };
        return { peerId: peer.id, range, current: inPlan(current, peer.id, range), planned: planned?.has(held) ?? false, lastReady: inPlan(last, peer.id, range), leases: this.sweep.leases(held), loading: this.loader.isLoading(held), quarantined: peer.quarantine !== undefined, ...(peer.quarantine && { quarantine: peer.quarantine.reason }) };
      }),
    );
  }

  /** Whether `peerId` holds `range` loaded and warm (what `/health` lists). */
  holdsWarm(peerId: string, range: LayerRange): boolean {
    return this.loader.holds({ peerId, range });
  }

  /** Load the current plan's ranges on their peers ahead of the first request. */
  async prepare(signal?: AbortSignal): Promise<void> {
    await this.readyPlan(signal);
  }

  async route(signal?: AbortSignal): Promise<HopLease[]> {
    const current = this.plan();
    let plan: RoutePlan;
    if (current.hops.every((hop) => this.loader.holds(hop))) plan = this.ready(current);
    else {
      const last = this.usableLastReady();
      // Warm the current plan in the background; a request waits only when nothing is warm.
      const loading = this.readyPlan();
      if (last) void loading.catch(() => {});
      plan = last ?? (await untilAborted(loading, signal));
    }
    return plan.hops.map((hop) => this.lease(hop.peerId, hop.range));
  }

  async replace(range: LayerRange, banned: ReadonlySet<string>, signal?: AbortSignal): Promise<HopLease | undefined> {
    const excluded = new Set(banned);
    for (const peer of this.peers) if (peer.quarantine) excluded.add(peer.id);
    for (let attempt = 0; attempt <= this.membership.size; attempt++) {
      const peerId = this.planner.replacement(range, excluded);
      if (!peerId || !this.membership.get(peerId)) return undefined;
      // Reserved while it loads: a range in no plan is not unloaded before its lease is taken.
      const unreserve = this.sweep.leaseOpened({ peerId, range });
      try {
        await untilAborted(this.ensureLoaded(this.membership.member(peerId), range), signal);
        return this.lease(peerId, range);
      } catch {
        signal?.throwIfAborted();
        excluded.add(peerId); // it did not get ready (and is quarantined now): try the next one
      } finally {
        unreserve();
      }
    }
    return undefined;
  }

  offPlan(hops: readonly { readonly peerId: string; readonly range: LayerRange }[]): boolean {
    if (hops.every((hop) => this.sweep.wanted(hop))) return false;
    try {
      this.servingPlan();
      return true;
    } catch {
      return false; // nothing warm to move to: stay
    }
  }

  /** The planned ranges of the current plan generation and of the one before (what peers may hold unleased). */
  recentPlans(): { generation: number; plans: readonly [HeldRange[], HeldRange[]] } {
    return { generation: this.sweep.planGeneration, plans: this.sweep.recentPlans() };
  }

  /**
   * A witness for `--verify`: the head itself when it is in the mesh, not the suspect and not
   * quarantined (it loads the range if it must and the range fits its memory budget beside
   * what it holds), else another peer that holds the range already. Undefined when there is none.
   */
  async verifierFor(range: LayerRange, suspect: string, signal?: AbortSignal): Promise<HopLease | undefined> {
    const head = this.membership.get(HEAD_PEER_ID);
    const candidates = [...(head && head.id !== suspect && !head.quarantine && this.fitsHead(head, range) ? [head] : [])];
    for (const peer of this.peers) {
      if (peer.id !== HEAD_PEER_ID && peer.id !== suspect && !peer.quarantine && this.loader.holds({ peerId: peer.id, range })) candidates.push(peer);
    }
    for (const peer of candidates) {
      try {
        await untilAborted(this.ensureLoaded(peer, range), signal);
        return this.lease(peer.id, range);
      } catch {
        signal?.throwIfAborted();
      }
    }
    return undefined;
  }

  weightsOf(peerId: string): WireWeights | undefined {
    const peer = this.membership.get(peerId);
    return peer && (peer.weights ?? this.model.artifacts.weights);
  }

  deviceOf(peerId: string): string | undefined {
    const peer = this.membership.get(peerId);
    return peer?.device ?? peer?.executionProvider;
  }

  /** The head's own layers are not checked by `--verify`. */
  trusts(peerId: string): boolean {
    return peerId === HEAD_PEER_ID;
  }

  /**
   * A session saw `peerId` hang or answer something unusable (or, under `--verify`, answer
   * wrongly): quarantine it, and revoke every session's lease on it, so the other sessions it
   * serves stop trusting it too: each replaces that hop at its next frame and rebuilds it from
   * history (their `release` still reaches the peer).
   */
  reportFault(peerId: string, range: LayerRange, fault: HopFault): void {
    const peer = this.membership.get(peerId);
    if (!peer) return;
    const reason = `${fault.kind} on layers ${rangeText(range)}: ${fault.reason}`;
    this.loader.cool(peerId); // back from quarantine, its ranges warm up again before they serve
    this.membership.quarantine(peerId, reason, fault.kind === 'hung' ? 'hang' : 'wrong');
    revokeLeases(peer.link, `peer ${peerId} is quarantined (${reason})`);
  }

  /**
   * Load `range` on `peer` unless it already holds it; a peer that refuses or does not answer
   * `ready` within the ready deadline is quarantined (and the promise rejects).
   */
  ensureLoaded(peer: MeshPeer, range: LayerRange): Promise<void> {
    return this.loader.ensureLoaded(peer, range);
  }

  /** Whether `peer` announced the model's weight format (a 2.0 peer serves only the float format equal to the dtype). */
  servesFormat(peer: MeshPeerInit): boolean {
    return this.planner.servesFormat(peer);
  }

  /** The head witnesses a range it holds, or one that fits its memory budget beside what it holds. */
  private fitsHead(head: MeshPeer, range: LayerRange): boolean {
    if (this.loader.holds({ peerId: head.id, range })) return true;
    const layers = head.ranges.reduce((sum, r) => sum + (r.end - r.start), range.end - range.start);
    return layers * this.model.bytesPerLayer <= (this.options.headBudgetBytes ?? head.memoryBudgetBytes);
  }

  /** A plan whose every hop's peer holds its range, loading what is missing (see class doc). */
  private async readyPlan(signal?: AbortSignal): Promise<RoutePlan> {
    for (let attempt = 0; ; attempt++) {
      const plan = this.plan();
      const missing = plan.hops.filter((hop) => !this.loader.holds(hop));
      if (missing.length === 0) return this.ready(plan);
      if (attempt > this.membership.size) throw new RouteUnavailableError(`peers keep failing to load their layers (${missing.map((h) => `${h.peerId} ${rangeText(h.range)}`).join(', ')})`);
      // Failures quarantine their peer; the next plan is made without it.
      await untilAborted(Promise.allSettled(missing.map((hop) => this.ensureLoaded(this.membership.member(hop.peerId), hop.range))), signal);
    }
  }

  /** `plan` is ready: remember it as the one to serve from while a later plan warms up. */
  private ready(plan: RoutePlan): RoutePlan {
    if (this.lastReady !== plan) {
      this.lastReady = plan;
      this.sweep.schedule(); // the ranges of the plan before may go now
      this.sweep.planMayHaveMoved();
    }
    return plan;
  }

  /** The last ready plan, while each of its hops is still warm on a peer that is up and not quarantined. */
  private usableLastReady(): RoutePlan | undefined {
    const last = this.lastReady;
    if (!last) return undefined;
    const usable = last.hops.every((hop) => this.loader.holds(hop) && !this.membership.get(hop.peerId)?.quarantine);
    return usable ? last : undefined;
  }

  /** The ranges the sweep keeps: both of the planner's plans, and the last ready plan while it is usable. */
  private plannedRanges(): HeldRangeMap<true> | undefined {
    const used = this.planner.planned();
    const last = this.usableLastReady();
    if (used && last) for (const hop of last.hops) used.set(hop, true);
    return used;
  }

  private lease(peerId: string, range: LayerRange): HopLease {
    const peer = this.membership.member(peerId);
    const held = { peerId, range };
    const link = new LeasedLink(peer.link);
    const close = this.sweep.leaseOpened(held);
    let open = true;
    const retire = () => {
      if (open) (open = false), close();
    };
    void link.closed.then(retire);
    // Same major as ours (checked at hello): before 3.1 (POSITION_RULE_MINOR) a peer may not keep the position rule.
    const rollback = peer.protocol === undefined || peer.protocol.minor >= POSITION_RULE_MINOR;
    // Chained routes (3.2, CHAIN_MINOR): only through a peer that announced them.
    const chained = peer.chain && (peer.protocol === undefined || peer.protocol.minor >= CHAIN_MINOR) ? peer.chain : undefined;
    // Lane frames (3.4, CHAIN_LANES_MINOR): only to and from a peer that announced them.
    const chain = chained && (peer.protocol === undefined || peer.protocol.minor >= CHAIN_LANES_MINOR) ? { ...chained, lanes: true } : chained;
    // Prefix entries as a tree (3.3, PREFIX_TREE_MINOR): a keep names a parent only to a peer that announced it.
    const prefixTree = peer.protocol === undefined || peer.protocol.minor >= PREFIX_TREE_MINOR;
    return { peerId, range, link, latency: this.loader.latency(held), rollback, prefixTree, retire, ...(chain && { chain }) };
  }
}
