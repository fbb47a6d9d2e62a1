/**
 * Range loading: a range is loaded on a peer on demand (`assign` → `ready`) and remembered;
 * a peer that refuses or does not get ready within the ready deadline is quarantined. A range
 * no plan needs is unloaded (`unload` → `unloaded`); a peer that refuses or does not answer
 * (a 2.0 peer does not know `unload`) keeps its ranges counted and is not asked again. Each
 * loaded range has its latency record (HopLatency), fresh when it loads: its first frame has
 * no deadline.
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

export const DEFAULT_READY_TIMEOUT_MS = 30_000;
/** How long a peer may take to answer `unload`; past it the range counts as still loaded. */
export const UNLOAD_TIMEOUT_MS = 10_000;

/** What loading tells the rest of the mesh (the sweep's bookkeeping). */
export interface RangeEvents {
  loaded(held: HeldRange): void;
  unloaded(held: HeldRange): void;
}

export class RangeLoader {
  private readonly loading = new HeldRangeMap<Promise<void>>();
  private readonly latencies = new HeldRangeMap<HopLatency>();
  /** Peers that refused or did not answer an `unload` (a 2.0 peer): their ranges stay. */
  private readonly keepsRanges = new WeakSet<MeshPeer>();

  constructor(
    private readonly model: MeshModel,
    private readonly membership: Membership,
    private readonly clock: Clock,
    private readonly readyTimeoutMs: number,
    private readonly events: RangeEvents,
  ) {}

  holds(held: HeldRange): boolean {
    return this.membership.get(held.peerId)?.ranges.some((r) => sameRange(r, held.range)) ?? false;
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
  }

  /**
   * Load `range` on `peer` unless it already holds it; a peer that refuses or does not answer
   * `ready` within the ready deadline is quarantined (and the promise rejects).
   */
  ensureLoaded(peer: MeshPeer, range: LayerRange): Promise<void> {
    const held = { peerId: peer.id, range };
    if (this.holds(held)) return Promise.resolve();
    let pending = this.loading.get(held);
    if (!pending) {
      pending = this.load(peer, range).finally(() => this.loading.delete(held));
      this.loading.set(held, pending);
    }
    return pending;
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
    const timeoutMs = this.readyTimeoutMs;
    try {
      const notReady = () => new RouteUnavailableError(`peer ${peer.id} did not answer 'ready' for layers ${rangeText(range)} within ${timeoutMs} ms`);
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
      peer.ranges.push(range);
      const held = { peerId: peer.id, range };
      this.events.loaded(held);
      peer.device = answer.device;
      peer.weights = answer.weights ?? this.model.artifacts.weights;
      this.latencies.set(held, new HopLatency()); // a newly loaded range: its first frame has no deadline
      this.membership.changed();
    } catch (error) {
      if (this.membership.isCurrent(peer)) this.membership.quarantine(peer.id, `not ready for layers ${rangeText(range)}: ${error instanceof Error ? error.message : String(error)}`);
      throw error;
    }
  }

  /**
   * Ask `peer` to unload `range`. It is not routed from now on; a peer that refuses (a 2.0 peer
   * does not know `unload`) or does not answer keeps it counted as loaded, and is not asked again.
   */
  async unload(peer: MeshPeer, range: LayerRange): Promise<void> {
    const index = peer.ranges.findIndex((r) => sameRange(r, range));
    if (index < 0) return;
    peer.ranges.splice(index, 1);
    const held = { peerId: peer.id, range };
    this.events.unloaded(held);
    this.latencies.delete(held);
    this.membership.changed();
    try {
      const late = () => new Error(`no 'unloaded' within ${UNLOAD_TIMEOUT_MS} ms`);
      const answer = await withDeadline(this.clock, UNLOAD_TIMEOUT_MS, late, (signal) => peer.link.control({ kind: 'unload', modelKey: this.model.modelKey, range }, signal));
      if (answer.kind !== 'unloaded') throw new Error(`answered '${answer.kind}' to unload`);
    } catch {
      if (!this.membership.isCurrent(peer)) return;
      this.keepsRanges.add(peer);
      if (!this.holds(held)) peer.ranges.push(range);
      this.membership.changed();
    }
  }
}
