/**
 * A session's lease on a shared link: requests go through the shared link, but closing the
 * lease only ends this session's use of it (its in-flight calls reject with LinkClosedError)
 * and leaves the socket to its owner, the mesh. `closed` resolves when either closes.
 *
 * Why a registry and not `shared.closed.then(…)` per lease: a peer's link lives as long as
 * the peer, and a promise's reactions cannot be removed, so every lease ever made — and,
 * through it, its session and that session's activation history — stayed reachable until the
 * peer left (the head's memory grew with every token served). One reaction per shared link
 * ends the leases still open on it; a closed lease leaves the set.
 *
 * A lease can also be revoked (`revokeLeases`): when the mesh quarantines a peer, every
 * session still leasing it stops sending it frames — its calls in flight and its next frame
 * reject with LinkClosedError, so the session replaces that hop and rebuilds it from history —
 * while control messages (its `release`) still reach the peer, so its KV is freed.
 */
import type { ControlMessage } from '../../shared/control.ts';
import { LinkClosedError, type PeerLink } from '../runtime/peer-link.ts';

/** The open leases of each shared link, and the links already closed (whose new leases end at once). */
const openLeases = new WeakMap<PeerLink, Set<LeasedLink>>();
const closedLinks = new WeakSet<PeerLink>();

function register(shared: PeerLink, lease: LeasedLink): void {
  if (closedLinks.has(shared)) return lease.end('the peer link closed');
  let leases = openLeases.get(shared);
  if (!leases) {
    const set = (leases = new Set());
    openLeases.set(shared, set);
    void shared.closed.then(() => {
      closedLinks.add(shared);
      openLeases.delete(shared);
      for (const open of [...set]) open.end('the peer link closed');
    });
  }
  leases.add(lease);
}

/** Revoke every open lease on `shared` (see the header): frames stop, control goes on. */
export function revokeLeases(shared: PeerLink, reason: string): void {
  for (const lease of [...(openLeases.get(shared) ?? [])]) lease.revoke(reason);
}

/** A call of a lease in flight: rejected by the lease's end (and, for a frame, its revocation). */
interface InFlight {
  readonly frame: boolean;
  readonly reject: (error: unknown) => void;
}

export class LeasedLink implements PeerLink {
  readonly closed: Promise<void>;
  /** Set once the lease ends: its calls reject with it. */
  private endedBy: LinkClosedError | undefined;
  /** Set once the lease is revoked: its frames reject with it. */
  private revokedBy: LinkClosedError | undefined;
  /**
   * The calls in flight, which an end or a revocation rejects at once — a set entry per call
   * rather than an abort listener on two lease signals and two promise races per frame.
   */
  private readonly inFlight = new Set<InFlight>();
  private markClosed!: () => void;

  constructor(private readonly shared: PeerLink) {
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
    register(shared, this);
  }

  private get isClosed(): boolean {
    return this.endedBy !== undefined;
  }

  request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    if (this.revokedBy !== undefined) return Promise.reject(this.revokedBy);
    if (this.endedBy !== undefined) return Promise.reject(this.endedBy);
    // The caller's signal reaches the shared link (so it can drop the pending request); the
    // lease's end or revocation only rejects this lease's calls.
    return this.race(this.shared.request(frame, signal), true);
  }

  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    if (this.endedBy !== undefined) return Promise.reject(this.endedBy);
    return this.race(this.shared.control(message, signal), false);
  }

  async close(reason = 'lease closed'): Promise<void> {
    this.end(reason);
  }

  /** Stop this lease's frames (idempotent): frames in flight and new ones reject with LinkClosedError; control messages still pass. */
  revoke(reason: string): void {
    if (this.revokedBy !== undefined) return;
    const error = (this.revokedBy = new LinkClosedError(reason));
    for (const call of [...this.inFlight]) {
      if (!call.frame) continue;
      this.inFlight.delete(call);
      call.reject(error);
    }
  }

  /** End this lease (idempotent): its calls reject with LinkClosedError; the shared link stays. */
  end(reason: string): void {
    if (this.isClosed) return;
    openLeases.get(this.shared)?.delete(this);
    const error = (this.endedBy = new LinkClosedError(reason));
    const calls = [...this.inFlight];
    this.inFlight.clear();
    for (const call of calls) call.reject(error);
    this.markClosed();
  }

  /** `work`'s outcome, unless the lease ends (or, for a frame, is revoked) first. */
  private race<T>(work: Promise<T>, frame: boolean): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const call: InFlight = { frame, reject };
      this.inFlight.add(call);
      work.then(
        (value) => {
          this.inFlight.delete(call);
          resolve(value);
        },
        (error: unknown) => {
          this.inFlight.delete(call);
          reject(error);
        },
      );
    });
  }
}
