/**
 * Mesh: the head's view of the peers serving its model, and the RouteProvider that Route
 * Sessions draw hops from. Routes come from the pure planner over the peers that are up and
 * not quarantined; a route only uses peers that reported `ready` for their range: a range is
 * loaded on demand (`assign` → `ready`) and remembered, and a peer that does not get ready in
 * time is quarantined and the plan made again without it. A peer a session reports as hung
 * or faulty is quarantined with a bounded back-off. A peer whose link closes leaves the mesh.
 * Each lease handed out is a LeasedLink over the peer's link. A range that no plan uses any
 * more (neither the plan over the peers that are up, nor the one that ignores quarantine) and
 * that no session holds a lease on is unloaded from its peer (`unload`) once it has stayed so
 * for `unloadGraceMs`: a peer holds what the route needs, not every range it was ever given.
 */
import type { AssignMessage, ShardConfigSummary } from '../../shared/control.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { POSITION_RULE_MINOR, type ProtocolVersion, type WireDtype, type WireWeightFormat, type WireWeights } from '../../shared/protocol.ts';
import { sameWeightSpec, weightSpecName } from '../model/quant/weight-format.ts';
import type { LayerRange } from '../model/types.ts';
import { untilAborted } from '../runtime/abort.ts';
import { systemClock, type Clock } from '../runtime/clock.ts';
import { BatchingLink } from './batching-link.ts';
import { LeasedLink, revokeLeases } from '../runtime/leased-link.ts';
import type { PeerLink } from '../runtime/peer-link.ts';
import type { HopFailure } from './hop-failure.ts';
import { HopLatency } from './hop-latency.ts';
import { HEAD_PEER_ID, planRoute, replacementFor, type PeerInfo, type PlanOptions, type RoutePlan } from './plan-route.ts';
import { PlanError } from './plan-error.ts';
import { DEFAULT_QUARANTINE, QuarantineBook, type QuarantinePolicy, type QuarantineState } from './quarantine.ts';
import { RouteUnavailableError } from './route-errors.ts';
import type { HopLease, RouteProvider } from './route-types.ts';
import type { VerifierSource } from './verify-hop.ts';

export interface MeshModel {
  readonly modelKey: string;
  readonly name: string;
  readonly config: ShardConfigSummary;
  readonly dtype: WireDtype;
  /** The weight format every range is served in. */
  readonly weights: WireWeights;
  /** Packed weight bytes of one decoder layer in that format (what the planner budgets). */
  readonly bytesPerLayer: number;
  /** Packed weight bytes of the embedding and LM head the head holds (taken from its budget first). */
  readonly headBytes?: number;
  /** Where a peer fetches the artifact of a range (a path on the head's origin or a URL). */
  artifactUrl(range: LayerRange): string;
}

export interface MeshOptions extends PlanOptions {
  /** Time and timers (quarantine back-off, ready deadlines); the system clock by default. */
  readonly clock?: Clock;
  readonly quarantine?: QuarantinePolicy;
  /** How long a peer may take to answer `assign` with `ready` before it is dropped from the plan (default 30 s). */
  readonly readyTimeoutMs?: number;
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

export interface MeshPeerInit {
  readonly id: string;
  readonly runtime: 'node' | 'browser' | 'head';
  readonly executionProvider: string;
  readonly memoryBudgetBytes: number;
  /** The link frames travel on (direct when the peer listens, else relay). */
  readonly link: PeerLink;
  readonly listenUrl?: string;
  /** The protocol the peer announced in its hello; absent for the head and in-process peers (this build's). */
  readonly protocol?: ProtocolVersion;
  /** Formats the peer announced it can serve (absent: a 2.0 peer, only the float format equal to the dtype). */
  readonly weightFormats?: readonly WireWeightFormat[];
}

export interface MeshPeer extends MeshPeerInit {
  readonly joinedAt: number;
  readonly ranges: LayerRange[]; // loaded and ready
  device?: string;
  /** The weight format its ranges were loaded in (from `ready`; a 2.0 peer: the model's float format). */
  weights?: WireWeights;
  /** Set while the peer is quarantined (not routed). */
  quarantine?: QuarantineState;
}

export const DEFAULT_READY_TIMEOUT_MS = 30_000;
export const DEFAULT_UNLOAD_GRACE_MS = 5000;
/** How long a peer may take to answer `unload`; past it the range counts as still loaded. */
export const UNLOAD_TIMEOUT_MS = 10_000;

const key = (r: LayerRange) => `${r.start}:${r.end}`;
const rangeText = (r: LayerRange) => `[${r.start}, ${r.end})`;

export class Mesh implements RouteProvider, VerifierSource {
  private readonly members = new Map<string, MeshPeer>();
  private readonly loading = new Map<string, Promise<void>>();
  private readonly latencies = new WeakMap<MeshPeer, Map<string, HopLatency>>();
  private readonly listeners = new Set<() => void>();
  private readonly clock: Clock;
  private readonly quarantines: QuarantineBook;
  /** Open leases per `peer@start:end`: a leased range is in use whatever the plan says. */
  private readonly leased = new Map<string, number>();
  /** Peers that refused or did not answer an `unload` (a 2.0 peer): their ranges stay. */
  private readonly keepsRanges = new WeakSet<MeshPeer>();
  /** When each `peer@start:end` was last in use: loaded, leased or released, or in a plan at a sweep. */
  private readonly lastUsed = new Map<string, number>();
  /** When the mesh last changed (a peer came or went, a range loaded or unloaded, a quarantine). */
  private changedAt = 0;
  private cancelSweep: (() => void) | undefined;
  private sweepAt: number | undefined;

  constructor(
    readonly model: MeshModel,
    private readonly options: MeshOptions,
  ) {
    this.clock = options.clock ?? systemClock;
    this.quarantines = new QuarantineBook(this.clock, options.quarantine ?? DEFAULT_QUARANTINE, (id) => {
      const peer = this.members.get(id);
      if (peer) peer.quarantine = this.quarantines.get(id);
      this.changed();
    });
  }

  /**
   * Add a peer (or the head, id 'head'). It leaves when its link closes. An id already in the
   * mesh is refused with ProtocolError('peer_id_taken'): call `vacate` first.
   */
  addPeer(init: MeshPeerInit): MeshPeer {
    if (this.members.has(init.id)) throw new ProtocolError('peer_id_taken', `peer id '${init.id}' is already in the mesh`);
    // A peer that rejoins under the same id keeps the quarantine it had.
    const link = this.options.batching === false ? init.link : new BatchingLink(init.link);
    const peer: MeshPeer = { ...init, link, joinedAt: this.clock.now(), ranges: [], quarantine: this.quarantines.get(init.id) };
    this.members.set(init.id, peer);
    void init.link.closed.then(() => {
      if (this.members.get(init.id) === peer) this.removePeer(init.id);
    });
    this.changed();
    return peer;
  }

  removePeer(id: string, reason = 'removed from the mesh'): void {
    const peer = this.members.get(id);
    if (!peer) return;
    this.members.delete(id);
    void peer.link.close(reason);
    this.changed();
  }

  /**
   * Make `id` free for a newcomer. No holder: nothing to do. A holder whose link answers a
   * ping within `pingTimeoutMs` keeps the id and keeps serving: the newcomer is refused with
   * ProtocolError('peer_id_taken'). A holder that does not answer (its socket died without
   * closing, its process hangs) is removed, so a restarted peer takes its id over. The id
   * 'head' is never free. Resolves with whether a silent holder was removed.
   */
  async vacate(id: string, pingTimeoutMs: number): Promise<boolean> {
    if (id === HEAD_PEER_ID) throw new ProtocolError('peer_id_taken', `the peer id '${HEAD_PEER_ID}' is reserved for the head itself`);
    const holder = this.members.get(id);
    if (!holder) return false;
    const alive = await answersPing(holder.link, pingTimeoutMs);
    if (this.members.get(id) !== holder) return false; // it left meanwhile
    if (alive) {
      throw new ProtocolError('peer_id_taken', `peer id '${id}' is held by a connected peer that still answers; start this peer with another --peer-id, or stop that one first`);
    }
    this.removePeer(id, `replaced: no answer to a ping within ${pingTimeoutMs} ms while another connection claimed its id`);
    return true;
  }

  get peers(): readonly MeshPeer[] {
    return [...this.members.values()];
  }

  /** Non-head peers that joined. */
  get remotePeerCount(): number {
    return this.peers.filter((p) => p.id !== HEAD_PEER_ID).length;
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * The current plan over the peers that are up and not quarantined. Throws
   * RouteUnavailableError; when quarantined peers are all that could cover some layers, it
   * names those layers and the peers.
   */
  plan(): RoutePlan {
    try {
      return this.planOver(false);
    } catch (error) {
      if (!(error instanceof RouteUnavailableError)) throw error;
      const held = this.quarantinedHops();
      if (held.length === 0) throw error;
      const what = held.map(({ range, peer }) => `layers ${rangeText(range)} are held only by quarantined peer ${peer.id} (${peer.quarantine!.reason}; back in ${Math.ceil((peer.quarantine!.until - this.clock.now()) / 1000)} s)`);
      throw new RouteUnavailableError(what.join('; '));
    }
  }

  /** True when the plan succeeds and every hop's peer reported ready for its range. */
  routeReady(): boolean {
    try {
      return this.plan().hops.every((hop) => this.holds(hop.peerId, hop.range));
    } catch {
      return false;
    }
  }

  /** Load the current plan's ranges on their peers ahead of the first request. */
  async prepare(signal?: AbortSignal): Promise<void> {
    await this.readyPlan(signal);
  }

  async route(signal?: AbortSignal): Promise<HopLease[]> {
    const plan = await this.readyPlan(signal);
    return plan.hops.map((hop) => this.lease(hop.peerId, hop.range));
  }

  async replace(range: LayerRange, banned: ReadonlySet<string>, signal?: AbortSignal): Promise<HopLease | undefined> {
    const excluded = new Set(banned);
    for (const peer of this.peers) if (peer.quarantine) excluded.add(peer.id);
    for (let attempt = 0; attempt <= this.members.size; attempt++) {
      const plan = (() => {
        try {
          return this.plan();
        } catch {
          return undefined;
        }
      })();
      let options: PlanOptions;
      try {
        options = this.planOptions();
      } catch {
        options = { headLayers: 'none' }; // the head holds a fixed range and is quarantined
      }
      const peerId = replacementFor(range, this.peerInfos(), excluded, { ...options, model: this.planModel(), plan });
      if (!peerId || !this.members.has(peerId)) return undefined;
      try {
        await untilAborted(this.ensureLoaded(this.member(peerId), range), signal);
        return this.lease(peerId, range);
      } catch {
        signal?.throwIfAborted();
        excluded.add(peerId); // it did not get ready (and is quarantined now): try the next one
      }
    }
    return undefined;
  }

  /**
   * A witness for `--verify`: the head itself when it is in the mesh, not the suspect and not
   * quarantined (it loads the range if it must and the range fits its memory budget beside
   * what it holds), else another peer that holds the range already. Undefined when there is none.
   */
  async verifierFor(range: LayerRange, suspect: string, signal?: AbortSignal): Promise<HopLease | undefined> {
    const head = this.members.get(HEAD_PEER_ID);
    const candidates = [...(head && head.id !== suspect && !head.quarantine && this.fitsHead(head, range) ? [head] : [])];
    for (const peer of this.members.values()) {
      if (peer.id !== HEAD_PEER_ID && peer.id !== suspect && !peer.quarantine && this.holds(peer.id, range)) candidates.push(peer);
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

  /** The head witnesses a range it holds, or one that fits its memory budget beside what it holds. */
  private fitsHead(head: MeshPeer, range: LayerRange): boolean {
    if (this.holds(head.id, range)) return true;
    const layers = head.ranges.reduce((sum, r) => sum + (r.end - r.start), range.end - range.start);
    return layers * this.model.bytesPerLayer <= (this.options.headBudgetBytes ?? head.memoryBudgetBytes);
  }

  weightsOf(peerId: string): WireWeights | undefined {
    const peer = this.members.get(peerId);
    return peer && (peer.weights ?? this.model.weights);
  }

  deviceOf(peerId: string): string | undefined {
    const peer = this.members.get(peerId);
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
  reportFault(peerId: string, range: LayerRange, failure: HopFailure): void {
    const peer = this.members.get(peerId);
    if (!peer) return;
    const reason = `${failure.kind} on layers ${rangeText(range)}: ${failure.reason}`;
    this.quarantines.add(peerId, reason);
    revokeLeases(peer.link, `peer ${peerId} is quarantined (${reason})`);
  }

  /**
   * Load `range` on `peer` unless it already holds it; a peer that refuses or does not answer
   * `ready` within the ready deadline is quarantined (and the promise rejects).
   */
  ensureLoaded(peer: MeshPeer, range: LayerRange): Promise<void> {
    if (this.holds(peer.id, range)) return Promise.resolve();
    const loadKey = `${peer.id}@${key(range)}`;
    let pending = this.loading.get(loadKey);
    if (!pending) {
      pending = this.load(peer, range).finally(() => this.loading.delete(loadKey));
      this.loading.set(loadKey, pending);
    }
    return pending;
  }

  /** A plan whose every hop's peer holds its range, loading what is missing (see class doc). */
  private async readyPlan(signal?: AbortSignal): Promise<RoutePlan> {
    for (let attempt = 0; ; attempt++) {
      const plan = this.plan();
      const missing = plan.hops.filter((hop) => !this.holds(hop.peerId, hop.range));
      if (missing.length === 0) return plan;
      if (attempt > this.members.size) throw new RouteUnavailableError(`peers keep failing to load their layers (${missing.map((h) => `${h.peerId} ${rangeText(h.range)}`).join(', ')})`);
      // Failures quarantine their peer; the next plan is made without it.
      await untilAborted(Promise.allSettled(missing.map((hop) => this.ensureLoaded(this.member(hop.peerId), hop.range))), signal);
    }
  }

  private async load(peer: MeshPeer, range: LayerRange): Promise<void> {
    const assign: AssignMessage = {
      kind: 'assign',
      modelKey: this.model.modelKey,
      model: this.model.name,
      range,
      dtype: this.model.dtype,
      weights: this.model.weights,
      artifactUrl: this.model.artifactUrl(range),
      config: this.model.config,
    };
    const timeoutMs = this.options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
    const deadline = new AbortController();
    const cancel = this.clock.setTimeout(() => deadline.abort(new RouteUnavailableError(`peer ${peer.id} did not answer 'ready' for layers ${rangeText(range)} within ${timeoutMs} ms`)), timeoutMs);
    try {
      const answer = await peer.link.control(assign, deadline.signal).catch((error: unknown) => {
        // Links rebuild an `error` answer into a ProtocolError: a refusal names the format.
        if (error instanceof ProtocolError && error.code === 'unsupported_weights') {
          throw new RouteUnavailableError(`peer ${peer.id} refused layers ${rangeText(range)} in ${weightSpecName(this.model.weights)}: [${error.code}] ${error.message}`);
        }
        throw error;
      });
      if (answer.kind !== 'ready') throw new RouteUnavailableError(`peer ${peer.id} answered '${answer.kind}' to assign`);
      if (key(answer.range) !== key(range) || answer.modelKey !== this.model.modelKey) {
        throw new RouteUnavailableError(`peer ${peer.id} answered 'ready' for ${answer.modelKey} layers ${rangeText(answer.range)}, not the ${rangeText(range)} it was assigned`);
      }
      if (answer.weights && !sameWeightSpec(answer.weights, this.model.weights)) {
        throw new RouteUnavailableError(`peer ${peer.id} loaded weights ${weightSpecName(answer.weights)}, not the assigned ${weightSpecName(this.model.weights)}`);
      }
      if (this.members.get(peer.id) !== peer) throw new RouteUnavailableError(`peer ${peer.id} left the mesh`);
      peer.ranges.push(range);
      this.lastUsed.set(`${peer.id}@${key(range)}`, this.clock.now());
      peer.device = answer.device;
      peer.weights = answer.weights ?? this.model.weights;
      this.latencyMap(peer).set(key(range), new HopLatency()); // a newly loaded range: its first frame has no deadline
      this.changed();
    } catch (error) {
      if (this.members.get(peer.id) === peer) this.quarantines.add(peer.id, `not ready for layers ${rangeText(range)}: ${error instanceof Error ? error.message : String(error)}`);
      throw error;
    } finally {
      cancel();
    }
  }

  private holds(peerId: string, range: LayerRange): boolean {
    return this.members.get(peerId)?.ranges.some((r) => key(r) === key(range)) ?? false;
  }

  private latencyMap(peer: MeshPeer): Map<string, HopLatency> {
    let map = this.latencies.get(peer);
    if (!map) this.latencies.set(peer, (map = new Map()));
    return map;
  }

  private lease(peerId: string, range: LayerRange): HopLease {
    const peer = this.member(peerId);
    const latencies = this.latencyMap(peer);
    let latency = latencies.get(key(range));
    if (!latency) latencies.set(key(range), (latency = new HopLatency()));
    const link = new LeasedLink(peer.link);
    const held = `${peerId}@${key(range)}`;
    this.leased.set(held, (this.leased.get(held) ?? 0) + 1);
    this.lastUsed.set(held, this.clock.now());
    void link.closed.then(() => {
      this.lastUsed.set(held, this.clock.now());
      const left = (this.leased.get(held) ?? 1) - 1;
      if (left > 0) return void this.leased.set(held, left);
      this.leased.delete(held);
      this.scheduleSweep();
    });
    // Same major as ours (checked at hello): before 3.1 (POSITION_RULE_MINOR) a peer may not keep the position rule.
    const rollback = peer.protocol === undefined || peer.protocol.minor >= POSITION_RULE_MINOR;
    return { peerId, range, link, latency, rollback };
  }

  /**
   * Look for unused ranges in `ms` (the grace period by default), unless a sweep is already due
   * sooner. A pending sweep is not pushed back by new activity — under steady traffic, where a
   * lease closes every moment, a stale range must still go — the sweep itself checks that each
   * range it unloads was idle for the whole grace period, and comes back for those not yet due.
   */
  private scheduleSweep(ms = this.options.unloadGraceMs ?? DEFAULT_UNLOAD_GRACE_MS): void {
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
   * Unload every range that neither plan uses, no lease holds, and that was idle — no lease
   * opened or closed on it, no change to the mesh — for the grace period (none while there is
   * no plan). Ranges unused but not idle long enough get a later sweep.
   */
  private sweep(): void {
    const now = this.clock.now();
    const grace = this.options.unloadGraceMs ?? DEFAULT_UNLOAD_GRACE_MS;
    const used = new Set<string>();
    for (const ignoreQuarantine of [false, true]) {
      try {
        for (const hop of this.planOver(ignoreQuarantine).hops) used.add(`${hop.peerId}@${key(hop.range)}`);
      } catch {
        if (!ignoreQuarantine) return; // no route now: keep everything, it may be needed when peers come back
      }
    }
    const due: [MeshPeer, LayerRange][] = [];
    let nextDue = Infinity;
    for (const peer of this.members.values()) {
      if (this.keepsRanges.has(peer)) continue;
      for (const range of peer.ranges) {
        const held = `${peer.id}@${key(range)}`;
        if (used.has(held) || this.leased.has(held) || this.loading.has(held)) {
          this.lastUsed.set(held, now);
          continue;
        }
        const idleSince = Math.max(this.lastUsed.get(held) ?? now, this.changedAt);
        if (now - idleSince >= grace) due.push([peer, range]);
        else nextDue = Math.min(nextDue, idleSince + grace);
      }
    }
    for (const held of this.lastUsed.keys()) {
      const [peerId] = held.split('@');
      if (!this.members.has(peerId!)) this.lastUsed.delete(held);
    }
    for (const [peer, range] of due) void this.unload(peer, range);
    if (nextDue < Infinity) this.scheduleSweep(Math.max(1, nextDue - now));
  }

  /**
   * Ask `peer` to unload `range`. It is not routed from now on; a peer that refuses (a 2.0 peer
   * does not know `unload`) or does not answer keeps it counted as loaded, and is not asked again.
   */
  private async unload(peer: MeshPeer, range: LayerRange): Promise<void> {
    const index = peer.ranges.findIndex((r) => key(r) === key(range));
    if (index < 0) return;
    peer.ranges.splice(index, 1);
    this.lastUsed.delete(`${peer.id}@${key(range)}`);
    this.latencyMap(peer).delete(key(range));
    this.changed();
    const deadline = new AbortController();
    const cancel = this.clock.setTimeout(() => deadline.abort(new Error(`no 'unloaded' within ${UNLOAD_TIMEOUT_MS} ms`)), UNLOAD_TIMEOUT_MS);
    try {
      const answer = await peer.link.control({ kind: 'unload', modelKey: this.model.modelKey, range }, deadline.signal);
      if (answer.kind !== 'unloaded') throw new Error(`answered '${answer.kind}' to unload`);
    } catch {
      if (this.members.get(peer.id) !== peer) return;
      this.keepsRanges.add(peer);
      if (!this.holds(peer.id, range)) peer.ranges.push(range);
      this.changed();
    } finally {
      cancel();
    }
  }

  private member(id: string): MeshPeer {
    const peer = this.members.get(id);
    if (!peer) throw new RouteUnavailableError(`peer ${id} left the mesh`);
    return peer;
  }

  /** The plan over the members; with `ignoreQuarantine`, as if no peer were quarantined. */
  private planOver(ignoreQuarantine: boolean): RoutePlan {
    const options = this.planOptions(ignoreQuarantine);
    try {
      return planRoute(this.planModel(), this.peerInfos(ignoreQuarantine), options);
    } catch (error) {
      if (error instanceof PlanError) throw new RouteUnavailableError(error.reason);
      throw error;
    }
  }

  /** Hops of the quarantine-blind plan whose peer is quarantined (empty when that plan fails too). */
  private quarantinedHops(): { range: LayerRange; peer: MeshPeer }[] {
    let plan: RoutePlan;
    try {
      plan = this.planOver(true);
    } catch {
      return [];
    }
    return plan.hops.flatMap((hop) => {
      const peer = this.members.get(hop.peerId);
      return peer?.quarantine ? [{ range: hop.range, peer }] : [];
    });
  }

  private planModel() {
    return { numLayers: this.model.config.numLayers, bytesPerLayer: this.model.bytesPerLayer, headBytes: this.model.headBytes };
  }

  private planOptions(ignoreQuarantine = false): PlanOptions {
    const { headLayers, headBudgetBytes } = this.options;
    const head = this.members.get(HEAD_PEER_ID);
    if (!head) return { headLayers: 'none' };
    if (head.quarantine && !ignoreQuarantine) {
      if (headLayers !== 'auto' && headLayers !== 'none') throw new RouteUnavailableError(`layers ${rangeText(headLayers)} are the head's (--head-layers) and the head is quarantined (${head.quarantine.reason})`);
      return { headLayers: 'none' };
    }
    return { headLayers, headBudgetBytes: headBudgetBytes ?? head.memoryBudgetBytes };
  }

  /** Whether `peer` announced the model's weight format (a 2.0 peer serves only the float format equal to the dtype). */
  servesFormat(peer: MeshPeerInit): boolean {
    const formats = peer.weightFormats ?? [this.model.dtype];
    return formats.includes(this.model.weights.format);
  }

  private peerInfos(ignoreQuarantine = false): PeerInfo[] {
    return this.peers
      .filter((p) => p.id !== HEAD_PEER_ID && this.servesFormat(p))
      .map((p) => ({ id: p.id, memoryBudgetBytes: p.memoryBudgetBytes, runtime: p.runtime === 'browser' ? 'browser' : 'node', ready: ignoreQuarantine || !p.quarantine }));
  }

  private changed(): void {
    this.changedAt = this.clock.now();
    this.scheduleSweep(); // the plan may have moved
    for (const listener of this.listeners) listener();
  }
}

/** Whether `link` answers a ping within `timeoutMs` (any failure or a late answer: no). */
async function answersPing(link: PeerLink, timeoutMs: number): Promise<boolean> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new Error(`no pong within ${timeoutMs} ms`)), timeoutMs);
  try {
    const answer = await link.control({ kind: 'ping', t: Date.now() }, abort.signal);
    return answer.kind === 'pong';
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
