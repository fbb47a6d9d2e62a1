/**
 * The mesh's plans: the pure planner (plan-route.ts) over the members that are up, serve the
 * model's weight format and are not quarantined. When quarantined peers are all that could
 * cover some layers, the refusal names those layers and the peers. A plan that ignores
 * quarantine tells the unload sweep which ranges will be wanted back.
 */
import type { LayerRange } from '../model/types.ts';
import type { Clock } from '../runtime/clock.ts';
import { HeldRangeMap, rangeText } from './held-range.ts';
import type { MeshPeer, MeshPeerInit, Membership } from './membership.ts';
import type { MeshModel } from './mesh-model.ts';
import { PlanError, RouteUnavailableError } from './plan-error.ts';
import { HEAD_PEER_ID, planRoute, replacementFor, type PeerInfo, type PlanModel, type PlanOptions, type RoutePlan } from './plan-route.ts';

export class MeshPlanner {
  constructor(
    private readonly model: MeshModel,
    private readonly options: PlanOptions,
    private readonly membership: Membership,
    private readonly clock: Clock,
  ) {}

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

  /**
   * The held ranges the plan uses, and a quarantined peer's own ranges in the plan that
   * ignores quarantine (wanted back when its quarantine ends); undefined when there is no plan
   * now. Other peers' ranges in that plan are not kept: a plan of the past holds no memory.
   */
  planned(): HeldRangeMap<true> | undefined {
    const used = new HeldRangeMap<true>();
    try {
      for (const hop of this.planOver(false).hops) used.set(hop, true);
    } catch {
      return undefined;
    }
    try {
      for (const hop of this.planOver(true).hops) if (this.membership.get(hop.peerId)?.quarantine) used.set(hop, true);
    } catch {
      // no plan even without quarantine: only the current one counts
    }
    return used;
  }

  /** Who takes over `range` (not one of `excluded`), or undefined. */
  replacement(range: LayerRange, excluded: ReadonlySet<string>): string | undefined {
    let plan: RoutePlan | undefined;
    try {
      plan = this.plan();
    } catch {
      plan = undefined;
    }
    let options: PlanOptions;
    try {
      options = this.planOptions();
    } catch {
      options = { headLayers: 'none' }; // the head holds a fixed range and is quarantined
    }
    return replacementFor(range, this.peerInfos(), excluded, { ...options, model: this.planModel(), plan });
  }

  /** Whether `peer` announced the model's weight format (a 2.0 peer serves only the float format equal to the dtype). */
  servesFormat(peer: MeshPeerInit): boolean {
    const formats = peer.weightFormats ?? [this.model.artifacts.dtype];
    return formats.includes(this.model.artifacts.weights.format);
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
      const peer = this.membership.get(hop.peerId);
      return peer?.quarantine ? [{ range: hop.range, peer }] : [];
    });
  }

  private planModel(): PlanModel {
    return { numLayers: this.model.config.numLayers, bytesPerLayer: this.model.bytesPerLayer, headBytes: this.model.headBytes };
  }

  private planOptions(ignoreQuarantine = false): PlanOptions {
    const { headLayers, headBudgetBytes } = this.options;
    const head = this.membership.get(HEAD_PEER_ID);
    if (!head) return { headLayers: 'none' };
    if (head.quarantine && !ignoreQuarantine) {
      if (headLayers !== 'auto' && headLayers !== 'none') throw new RouteUnavailableError(`layers ${rangeText(headLayers)} are the head's (--head-layers) and the head is quarantined (${head.quarantine.reason})`);
      return { headLayers: 'none' };
    }
    return { headLayers, headBudgetBytes: headBudgetBytes ?? head.memoryBudgetBytes };
  }

  private peerInfos(ignoreQuarantine = false): PeerInfo[] {
    return this.membership.peers
      .filter((p) => p.id !== HEAD_PEER_ID && this.servesFormat(p))
      .map((p) => ({ id: p.id, memoryBudgetBytes: p.memoryBudgetBytes, runtime: p.runtime === 'browser' ? 'browser' : 'node', ready: ignoreQuarantine || !p.quarantine }));
  }
}
