/**
 * Membership: the peers serving the head's model — who joined, who left, who is quarantined.
 * A peer leaves when its link closes or it is removed; an id is taken until its holder leaves
 * or, asked to make room for a newcomer, fails to answer a ping (`vacate`). Quarantine is kept
 * by peer id, so a peer that leaves and rejoins keeps it. Every change is announced to the
 * mesh's listeners.
 */
import { ProtocolError } from '../../shared/protocol-error.ts';
import type { ProtocolVersion, WireWeightFormat, WireWeights } from '../../shared/protocol.ts';
import type { LayerRange } from '../model/types.ts';
import type { Clock } from '../runtime/clock.ts';
import { withDeadline } from '../runtime/deadline.ts';
import type { PeerLink } from '../runtime/peer-link.ts';
import { RouteUnavailableError } from './plan-error.ts';
import { HEAD_PEER_ID } from './plan-route.ts';
import type { ChainAccess } from './route-provider.ts';
import { type FaultClass, QuarantineBook, type QuarantinePolicy, type QuarantineState } from './quarantine.ts';

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
  /** How sessions chain through it (protocol 3.2); absent: star only. */
  readonly chain?: ChainAccess;
  /** Head connections the peer said it made before this one (3.5 `hello.rejoin`); absent: its first, or a 3.4 peer. */
  readonly connectionsBefore?: number;
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

export class Membership {
  private readonly members = new Map<string, MeshPeer>();
  private readonly listeners = new Set<() => void>();
  private readonly quarantines: QuarantineBook;
  /** When the membership last changed (a peer came or went, a range loaded or unloaded, a quarantine). */
  changedAt = 0;

  /** `onChanged` runs first on every change, before the listeners (the mesh reschedules its sweep). */
  constructor(
    private readonly clock: Clock,
    policy: QuarantinePolicy,
    private readonly onChanged: () => void,
  ) {
    this.quarantines = new QuarantineBook(clock, policy, (id) => {
      const peer = this.members.get(id);
      if (peer) peer.quarantine = this.quarantines.get(id);
      this.changed();
    });
  }

  /** Add a peer whose frames travel on `link`; it leaves when `init.link` closes. An id in use is refused (`peer_id_taken`). */
  add(init: MeshPeerInit, link: PeerLink): MeshPeer {
    if (this.members.has(init.id)) throw new ProtocolError('peer_id_taken', `peer id '${init.id}' is already in the mesh`);
    // A peer that rejoins under the same id keeps the quarantine it had.
    const peer: MeshPeer = { ...init, link, joinedAt: this.clock.now(), ranges: [], quarantine: this.quarantines.get(init.id) };
    this.members.set(init.id, peer);
    void init.link.closed.then(() => {
      if (this.members.get(init.id) === peer) this.remove(init.id);
    });
    this.changed();
    return peer;
  }

  remove(id: string, reason = 'removed from the mesh'): void {
    const peer = this.members.get(id);
    if (!peer) return;
    this.members.delete(id);
    void peer.link.close(reason);
    this.changed();
  }

  /** See Mesh.vacate. */
  async vacate(id: string, pingTimeoutMs: number): Promise<boolean> {
    if (id === HEAD_PEER_ID) throw new ProtocolError('peer_id_taken', `the peer id '${HEAD_PEER_ID}' is reserved for the head itself`);
    const holder = this.members.get(id);
    if (!holder) return false;
    const alive = await this.answersPing(holder.link, pingTimeoutMs);
    if (this.members.get(id) !== holder) return false; // it left meanwhile
    if (alive) {
      throw new ProtocolError('peer_id_taken', `peer id '${id}' is held by a connected peer that still answers; start this peer with another --peer-id, or stop that one first`);
    }
    this.remove(id, `replaced: no answer to a ping within ${pingTimeoutMs} ms while another connection claimed its id`);
    return true;
  }

  get(id: string): MeshPeer | undefined {
    return this.members.get(id);
  }

  /** The member `id`; RouteUnavailableError when it left. */
  member(id: string): MeshPeer {
    const peer = this.members.get(id);
    if (!peer) throw new RouteUnavailableError(`peer ${id} left the mesh`);
    return peer;
  }

  /** Whether `peer` (this very object, not a newcomer with its id) is still in the mesh. */
  isCurrent(peer: MeshPeer): boolean {
    return this.members.get(peer.id) === peer;
  }

  get size(): number {
    return this.members.size;
  }

  get peers(): readonly MeshPeer[] {
    return [...this.members.values()];
  }

  /** Non-head peers that joined. */
  get remotePeerCount(): number {
    let count = 0;
    for (const id of this.members.keys()) if (id !== HEAD_PEER_ID) count++;
    return count;
  }

  /** Quarantine peer `id`; `fault` picks the back-off (quarantine.ts): a hang's is short, a wrong answer's long. */
  quarantine(id: string, reason: string, fault: FaultClass): void {
    this.quarantines.add(id, reason, fault);
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  changed(): void {
    this.changedAt = this.clock.now();
    this.onChanged();
    for (const listener of this.listeners) listener();
  }

  /** Whether `link` answers a ping within `timeoutMs` (any failure or a late answer: no). */
  private async answersPing(link: PeerLink, timeoutMs: number): Promise<boolean> {
    try {
      const answer = await withDeadline(this.clock, timeoutMs, () => new Error(`no pong within ${timeoutMs} ms`), (signal) => link.control({ kind: 'ping', t: Date.now() }, signal));
      return answer.kind === 'pong';
    } catch {
      return false;
    }
  }
}
