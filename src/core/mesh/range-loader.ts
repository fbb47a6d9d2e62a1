/**
 * Range loading: a range is loaded on a peer on demand (`assign` → `ready`), then warmed up
 * (range-warm-up.ts: it serves sessions only after it answered a warm-up frame), and
 * remembered; a peer that refuses, does not get ready within the ready deadline, or fails its
 * warm-up is quarantined — no request waits on it, unless there is no other route. A peer's
 * ranges go cold when it is quarantined: when it is back, each warms up again before it
 * serves. A range no plan needs is unloaded (`unload` → `unloaded`); a peer that refuses (a 2.0
 * peer does not know `unload`) keeps its ranges counted and is not asked again; one that does
 * not answer in time (paused, busy) keeps that range counted and is asked again later. Each warm range has its latency record (HopLatency), started by the warm-up's
 * decode: every frame a session sends it has a deadline.
 */
import type { AssignMessage } from '../../shared/control.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { sameWeightSpec, weightSpecName } from '../model/quant/weight-format.ts';
import type { LayerRange } from '../model/types.ts';
import type { Clock } from '../runtime/clock.ts';
import { withDeadline } from '../runtime/deadline.ts';
import { HeldRangeMap, rangeText, sameRange, type HeldRange } from './held-range.ts';
import { HopLatency } from './hop-latency.ts';
import type { MeshPeer, Membership } from './membership.ts';
import type { MeshModel } from './mesh-model.ts';
import { RouteUnavailableError } from './plan-error.ts';
import { DEFAULT_WARM_UP_TIMEOUT_MS, WarmUpError, warmUpRange } from './range-warm-up.ts';

export const DEFAULT_READY_TIMEOUT_MS = 30_000;
/** How long a peer may take to answer `unload`; past it the range counts as still loaded. */
export const UNLOAD_TIMEOUT_MS = 10_000;

/** What loading tells the rest of the mesh (the sweep's bookkeeping). */
export interface RangeEvents {
  loaded(held: HeldRange): void;
  unloaded(held: HeldRange): void;
}

export interface RangeLoaderTimes {
  /** How long a peer may take to answer `assign` with `ready`. */
  readonly readyTimeoutMs: number;
  /** The cold-start deadline of a range's warm-up prefill (default DEFAULT_WARM_UP_TIMEOUT_MS). */
  readonly warmUpTimeoutMs?: number;
  /** The deadline of its warm decode (`--hop-timeout`, the ceiling of every frame's). */
  readonly hopTimeoutMs?: number;
  /** False: no warm-up frames, a range serves once `ready` (MeshOptions.warmUpFrames). */
  readonly warmUpFrames?: boolean;
}

export class RangeLoader {
  private readonly loading = new HeldRangeMap<Promise<void>>();
  private readonly latencies = new HeldRangeMap<HopLatency>();
  /** Loaded ranges that answered their warm-up (and whose peer was not quarantined since). */
  private readonly warm = new HeldRangeMap<true>();
  /** Peers that refused or did not answer an `unload` (a 2.0 peer): their ranges stay. */
  private readonly keepsRanges = new WeakSet<MeshPeer>();

  constructor(
    private readonly model: MeshModel,
    private readonly membership: Membership,
    private readonly clock: Clock,
    private readonly times: RangeLoaderTimes,
    private readonly events: RangeEvents,
  ) {}

  /** Whether `held`'s peer loaded the range and it answered its warm-up: it may serve sessions. */
  holds(held: HeldRange): boolean {
    return this.loaded(held) && this.warm.has(held);
  }

  /** Whether `held`'s peer loaded the range (`ready`), warm or not. */
  loaded(held: HeldRange): boolean {
    return this.membership.get(held.peerId)?.ranges.some((r) => sameRange(r, held.range)) ?? false;
  }

  /** `peerId` was quarantined: its ranges warm up again before they serve. */
  cool(peerId: string): void {
    this.warm.retainPeers((id) => id !== peerId);
  }

  isLoading(held: HeldRange): boolean {
    return this.loading.has(held);
  }

  /** Whether the sweep may unload `peer`'s ranges (it answered every `unload` so far). */
  unloads(peer: MeshPeer): boolean {
    return !this.keepsRanges.has(peer);
  }

  /** The latency record of a held range (shared by every lease on it). */
  latency(held: HeldRange): HopLatency {
    let latency = this.latencies.get(held);
    if (!latency) this.latencies.set(held, (latency = new HopLatency()));
    return latency;
  }

  /** Forget the records of peers that left. */
  forgetDeparted(): void {
    this.latencies.retainPeers((id) => this.membership.get(id) !== undefined);
    this.warm.retainPeers((id) => this.membership.get(id) !== undefined);
  }

  /**
   * Load and warm up `range` on `peer` unless it holds it warm already; a peer that refuses,
   * does not answer `ready` within the ready deadline or fails its warm-up is quarantined (and
   * the promise rejects).
   */
  ensureLoaded(peer: MeshPeer, range: LayerRange): Promise<void> {
    const held = { peerId: peer.id, range };
    if (this.holds(held)) return Promise.resolve();
    let pending = this.loading.get(held);
    if (!pending) {
      pending = this.loadAndWarm(peer, range).finally(() => this.loading.delete(held));
      this.loading.set(held, pending);
    }
    return pending;
  }

  private async loadAndWarm(peer: MeshPeer, range: LayerRange): Promise<void> {
    const held = { peerId: peer.id, range };
    if (!this.loaded(held)) await this.load(peer, range);
    if (this.times.warmUpFrames === false) {
      if (!this.latencies.has(held)) this.latencies.set(held, new HopLatency());
      this.warm.set(held, true);
      return this.membership.changed();
    }
    try {
      const ceiling = this.times.hopTimeoutMs ?? DEFAULT_WARM_UP_TIMEOUT_MS;
      const cold = Math.max(this.times.warmUpTimeoutMs ?? DEFAULT_WARM_UP_TIMEOUT_MS, ceiling);
      const { warmMs } = await warmUpRange({ peerId: peer.id, link: peer.link, range, hiddenSize: this.model.config.hiddenSize, dtype: this.model.artifacts.dtype }, this.clock, cold, ceiling);
      if (!this.membership.isCurrent(peer) || !this.loaded(held)) throw new RouteUnavailableError(`peer ${peer.id} left the mesh or unloaded layers ${rangeText(range)} during their warm-up`);
      const latency = new HopLatency();
      latency.record(1, warmMs);
      this.latencies.set(held, latency);
      this.warm.set(held, true);
      this.membership.changed();
    } catch (error) {
      this.failed(peer, range, error);
      throw error;
    }
  }

  /**
   * Quarantine `peer` (still in the mesh) for failing to get `range` ready; its ranges go cold.
   * No answer in time (`late`) is a hang; a refusal or a wrong answer is a wrong answer.
   */
  private failed(peer: MeshPeer, range: LayerRange, error: unknown, late = error instanceof WarmUpError && error.late): void {
    if (!this.membership.isCurrent(peer)) return;
    this.cool(peer.id);
    this.membership.quarantine(peer.id, `not ready for layers ${rangeText(range)}: ${error instanceof Error ? error.message : String(error)}`, late ? 'hang' : 'wrong');
  }

  private async load(peer: MeshPeer, range: LayerRange): Promise<void> {
    const assign: AssignMessage = {
      kind: 'assign',
      modelKey: this.model.modelKey,
      model: this.model.name,
      range,
      dtype: this.model.artifacts.dtype,
      weights: this.model.artifacts.weights,
      artifactUrl: this.model.artifacts.url(range),
      config: this.model.config,
    };
    const timeoutMs = this.times.readyTimeoutMs;
    let late = false;
    try {
      const notReady = () => {
        late = true;
        return new RouteUnavailableError(`peer ${peer.id} did not answer 'ready' for layers ${rangeText(range)} within ${timeoutMs} ms`);
      };
      const answer = await withDeadline(this.clock, timeoutMs, notReady, (signal) => peer.link.control(assign, signal)).catch((error: unknown) => {
        // Links rebuild an `error` answer into a ProtocolError: a refusal names the format.
        if (error instanceof ProtocolError && error.code === 'unsupported_weights') {
          throw new RouteUnavailableError(`peer ${peer.id} refused layers ${rangeText(range)} in ${weightSpecName(this.model.artifacts.weights)}: [${error.code}] ${error.message}`);
        }
        throw error;
      });
      if (answer.kind !== 'ready') throw new RouteUnavailableError(`peer ${peer.id} answered '${answer.kind}' to assign`);
      if (!sameRange(answer.range, range) || answer.modelKey !== this.model.modelKey) {
        throw new RouteUnavailableError(`peer ${peer.id} answered 'ready' for ${answer.modelKey} layers ${rangeText(answer.range)}, not the ${rangeText(range)} it was assigned`);
      }
      if (answer.weights && !sameWeightSpec(answer.weights, this.model.artifacts.weights)) {
        throw new RouteUnavailableError(`peer ${peer.id} loaded weights ${weightSpecName(answer.weights)}, not the assigned ${weightSpecName(this.model.artifacts.weights)}`);
      }
      if (!this.membership.isCurrent(peer)) throw new RouteUnavailableError(`peer ${peer.id} left the mesh`);
      const held = { peerId: peer.id, range };
      this.warm.delete(held); // a peer that rejoined under the same id warms up again
      peer.ranges.push(range);
      this.events.loaded(held);
      peer.device = answer.device;
      peer.weights = answer.weights ?? this.model.artifacts.weights;
      this.membership.changed();
    } catch (error) {
      this.failed(peer, range, error, late);
      throw error;
    }
  }

  /**
   * Ask `peer` to unload `range`. It is not routed from now on; a peer that refuses (a 2.0 peer
   * does not know `unload`) keeps it counted as loaded and is not asked again; one that does not
   * answer within UNLOAD_TIMEOUT_MS keeps it counted (not warm: it warms up again if a plan
   * wants it back) and may be asked again.
   */
  async unload(peer: MeshPeer, range: LayerRange): Promise<void> {
    const index = peer.ranges.findIndex((r) => sameRange(r, range));
    if (index < 0) return;
    peer.ranges.splice(index, 1);
    const held = { peerId: peer.id, range };
    this.events.unloaded(held);
    this.latencies.delete(held);
    this.warm.delete(held);
    this.membership.changed();
    let late = false;
    try {
      const timedOut = () => ((late = true), new Error(`no 'unloaded' within ${UNLOAD_TIMEOUT_MS} ms`));
      const answer = await withDeadline(this.clock, UNLOAD_TIMEOUT_MS, timedOut, (signal) => peer.link.control({ kind: 'unload', modelKey: this.model.modelKey, range }, signal));
      if (answer.kind !== 'unloaded') throw new Error(`answered '${answer.kind}' to unload`);
    } catch {
      if (!this.membership.isCurrent(peer)) return;
      // A refusal is for good (a 2.0 peer); a peer that was only slow (paused, busy) is asked again at the next sweep.
      if (!late) this.keepsRanges.add(peer);
      if (!this.loaded(held)) peer.ranges.push(range);
      this.membership.changed();
    }
  }
}
