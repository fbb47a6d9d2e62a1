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
import { untilAborted } from '../runtime/abort.ts';
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

export class LeasedLink implements PeerLink {
  readonly closed: Promise<void>;
  private readonly ended = new AbortController();
  private readonly revoked = new AbortController();
  private markClosed!: () => void;

  constructor(private readonly shared: PeerLink) {
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
    register(shared, this);
  }

  private get isClosed(): boolean {
    return this.ended.signal.aborted;
  }

  request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    if (this.revoked.signal.aborted) return Promise.reject(this.revoked.signal.reason);
    return untilAborted(this.guard((s) => this.shared.request(frame, s), signal), this.revoked.signal);
  }

  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    return this.guard((s) => this.shared.control(message, s), signal);
  }

  async close(reason = 'lease closed'): Promise<void> {
    this.end(reason);
  }

  /** Stop this lease's frames (idempotent): frames in flight and new ones reject with LinkClosedError; control messages still pass. */
  revoke(reason: string): void {
    if (!this.revoked.signal.aborted) this.revoked.abort(new LinkClosedError(reason));
  }

  /** End this lease (idempotent): its calls reject with LinkClosedError; the shared link stays. */
  end(reason: string): void {
    if (this.isClosed) return;
    openLeases.get(this.shared)?.delete(this);
    this.ended.abort(new LinkClosedError(reason));
    this.markClosed();
  }

  private guard<T>(call: (signal?: AbortSignal) => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (this.isClosed) return Promise.reject(this.ended.signal.reason);
    // The caller's signal reaches the shared link (so it can drop the pending request); the
    // lease's end only rejects this lease's calls.
    return untilAborted(call(signal), this.ended.signal);
  }
}
