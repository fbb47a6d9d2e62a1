/**
 * Mesh: the head's view of the peers serving its model, and the RouteProvider that Route
 * Sessions draw hops from. Routes come from the pure planner over the peers that are up;
 * a range is loaded on a peer on demand (`assign` → `ready`) and remembered. A peer whose
 * link closes leaves the mesh. Each lease handed out is a LeasedLink over the peer's link.
 */
import type { AssignMessage, ShardConfigSummary } from '../../shared/control.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import type { WireDtype, WireWeightFormat, WireWeights } from '../../shared/protocol.ts';
import { sameWeightSpec, weightSpecName } from '../model/quant/weight-format.ts';
import type { LayerRange } from '../model/types.ts';
import { LeasedLink } from '../runtime/leased-link.ts';
import type { PeerLink } from '../runtime/peer-link.ts';
import { HEAD_PEER_ID, planRoute, replacementFor, type PeerInfo, type PlanOptions, type RoutePlan } from './plan-route.ts';
import { PlanError } from './plan-error.ts';
import { RouteUnavailableError } from './route-errors.ts';
import type { HopLease, RouteProvider } from './route-types.ts';

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

export interface MeshPeerInit {
  readonly id: string;
  readonly runtime: 'node' | 'browser' | 'head';
  readonly executionProvider: string;
  readonly memoryBudgetBytes: number;
  /** The link frames travel on (direct when the peer listens, else relay). */
  readonly link: PeerLink;
  readonly listenUrl?: string;
  /** Formats the peer announced it can serve (absent: a 2.0 peer, only the float format equal to the dtype). */
  readonly weightFormats?: readonly WireWeightFormat[];
}

export interface MeshPeer extends MeshPeerInit {
  readonly joinedAt: number;
  readonly ranges: LayerRange[]; // loaded and ready
  device?: string;
  /** The weight format its ranges were loaded in (from `ready`; a 2.0 peer: the model's float format). */
  weights?: WireWeights;
}

const key = (r: LayerRange) => `${r.start}:${r.end}`;

export class Mesh implements RouteProvider {
  private readonly members = new Map<string, MeshPeer>();
  private readonly loading = new Map<string, Promise<void>>();
  private readonly listeners = new Set<() => void>();

  constructor(
    readonly model: MeshModel,
    private readonly options: PlanOptions,
  ) {}

  /**
   * Add a peer (or the head, id 'head'). It leaves when its link closes. An id already in the
   * mesh is refused with ProtocolError('peer_id_taken'): call `vacate` first.
   */
  addPeer(init: MeshPeerInit): MeshPeer {
    if (this.members.has(init.id)) throw new ProtocolError('peer_id_taken', `peer id '${init.id}' is already in the mesh`);
    const peer: MeshPeer = { ...init, joinedAt: Date.now(), ranges: [] };
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

  /** The current plan over the peers that are up (throws RouteUnavailableError). */
  plan(): RoutePlan {
    try {
      return planRoute(this.planModel(), this.peerInfos(), this.planOptions());
    } catch (error) {
      if (error instanceof PlanError) throw new RouteUnavailableError(error.reason);
      throw error;
    }
  }

  /** Load the current plan's ranges on their peers ahead of the first request. */
  async prepare(signal?: AbortSignal): Promise<void> {
    const plan = this.plan();
    await Promise.all(plan.hops.map((hop) => this.ensureLoaded(this.member(hop.peerId), hop.range, signal)));
  }

  async route(signal?: AbortSignal): Promise<HopLease[]> {
    const plan = this.plan();
    await Promise.all(plan.hops.map((hop) => this.ensureLoaded(this.member(hop.peerId), hop.range, signal)));
    return plan.hops.map((hop) => this.lease(hop.peerId, hop.range));
  }

  async replace(range: LayerRange, banned: ReadonlySet<string>, signal?: AbortSignal): Promise<HopLease | undefined> {
    const plan = (() => {
      try {
        return this.plan();
      } catch {
        return undefined;
      }
    })();
    const peerId = replacementFor(range, this.peerInfos(), banned, { ...this.planOptions(), model: this.planModel(), plan });
    if (!peerId || !this.members.has(peerId)) return undefined;
    await this.ensureLoaded(this.member(peerId), range, signal);
    return this.lease(peerId, range);
  }

  /** Load `range` on `peer` unless it already holds it. */
  async ensureLoaded(peer: MeshPeer, range: LayerRange, signal?: AbortSignal): Promise<void> {
    if (peer.ranges.some((r) => key(r) === key(range))) return;
    const loadKey = `${peer.id}@${key(range)}`;
    let pending = this.loading.get(loadKey);
    if (!pending) {
      pending = this.load(peer, range, signal).finally(() => this.loading.delete(loadKey));
      this.loading.set(loadKey, pending);
    }
    await pending;
  }

  private async load(peer: MeshPeer, range: LayerRange, signal?: AbortSignal): Promise<void> {
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
    const answer = await peer.link.control(assign, signal).catch((error: unknown) => {
      // Links rebuild an `error` answer into a ProtocolError: a refusal names the format.
      if (error instanceof ProtocolError && error.code === 'unsupported_weights') {
        throw new RouteUnavailableError(`peer ${peer.id} refused layers [${range.start}, ${range.end}) in ${weightSpecName(this.model.weights)}: [${error.code}] ${error.message}`);
      }
      throw error;
    });
    if (answer.kind === 'error') throw new RouteUnavailableError(`peer ${peer.id} refused layers [${range.start}, ${range.end}) in ${weightSpecName(this.model.weights)}: [${answer.code}] ${answer.message}`);
    if (answer.kind !== 'ready') throw new RouteUnavailableError(`peer ${peer.id} answered '${answer.kind}' to assign`);
    if (answer.weights && !sameWeightSpec(answer.weights, this.model.weights)) {
      throw new RouteUnavailableError(`peer ${peer.id} loaded weights ${weightSpecName(answer.weights)}, not the assigned ${weightSpecName(this.model.weights)}`);
    }
    peer.ranges.push(range);
    peer.device = answer.device;
    peer.weights = answer.weights ?? this.model.weights;
    this.changed();
  }

  private lease(peerId: string, range: LayerRange): HopLease {
    return { peerId, range, link: new LeasedLink(this.member(peerId).link) };
  }

  private member(id: string): MeshPeer {
    const peer = this.members.get(id);
    if (!peer) throw new RouteUnavailableError(`peer ${id} left the mesh`);
    return peer;
  }

  private planModel() {
    return { numLayers: this.model.config.numLayers, bytesPerLayer: this.model.bytesPerLayer, headBytes: this.model.headBytes };
  }

  private planOptions(): PlanOptions {
    const head = this.members.get(HEAD_PEER_ID);
    if (!head) return { ...this.options, headLayers: 'none' };
    return { ...this.options, headBudgetBytes: this.options.headBudgetBytes ?? head.memoryBudgetBytes };
  }

  /** Whether `peer` announced the model's weight format (a 2.0 peer serves only the float format equal to the dtype). */
  servesFormat(peer: MeshPeerInit): boolean {
    const formats = peer.weightFormats ?? [this.model.dtype];
    return formats.includes(this.model.weights.format);
  }

  private peerInfos(): PeerInfo[] {
    return this.peers
      .filter((p) => p.id !== HEAD_PEER_ID && this.servesFormat(p))
      .map((p) => ({ id: p.id, memoryBudgetBytes: p.memoryBudgetBytes, runtime: p.runtime === 'browser' ? 'browser' : 'node' }));
  }

  private changed(): void {
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
