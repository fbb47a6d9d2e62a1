/**
 * What a Route Session draws from the mesh: leases on hops (RouteProvider) and, under
 * `--verify`, witnesses that replay a hop elsewhere (VerifierSource). The Mesh implements
 * both; complete-model mode's StaticRoute implements the first. Plain types: the session
 * side (src/core/route) depends on them, never the other way.
 */
import type { WireWeights } from '../../shared/protocol.ts';
import type { LayerRange } from '../model/types.ts';
import type { ChainPort } from '../runtime/chain-port.ts';
import type { PeerLink } from '../runtime/peer-link.ts';
import type { HopLatency } from './hop-latency.ts';

/** One hop a session may use: a peer holding `range`, reached through `link`. */
export interface HopLease {
  readonly peerId: string;
  readonly range: LayerRange;
  /** The session's own link to the peer; the session closes it when it is done. */
  readonly link: PeerLink;
  /** This peer's recent latency on this range (shared across sessions); its deadlines come from it. */
  readonly latency?: HopLatency;
  /**
   * Whether the peer keeps the position rule (protocol 2.1): a frame starting below its KV
   * length drops the positions from there. False: the session sends it no such frame, so no
   * speculative step runs on a route through it. Absent: true.
   */
  readonly rollback?: boolean;
  /** The peer keeps prefix entries as a tree (protocol 3.4): a keep may name a parent. Absent: true. */
  readonly prefixTree?: boolean;
  /** The peer runs chained routes (protocol 3.2): absent, every frame to it goes head → peer → head. */
  readonly chain?: ChainAccess;
  /**
   * The session sends this hop no more frames (it was replaced, or the session moved to another
   * route) but keeps the link open for its release at the end: the range no longer counts as
   * leased by it, so the mesh may unload it. Idempotent; closing the link does the same.
   */
  readonly retire?: () => void;
}

/** How a session chains through a hop's peer (protocol 3.2). */
export interface ChainAccess {
  /** Chain frames in, copies and chain errors out. */
  readonly port: ChainPort;
  /**
   * Where the previous hop dials this peer (its advertised URL); absent: it cannot be dialled
   * (a browser tab, a peer behind NAT), so the link into it goes through the head — unless the
   * previous hop already holds a link to it (`dialable`).
   */
  readonly url?: string;
  /** Whether a previous hop can reach it without a URL (an in-process peer). */
  readonly dialable?: boolean;
  /** Whether it reads lane frames (protocol 3.4, kinds 8 and 9); set by the mesh from the peer's hello. */
  readonly lanes?: boolean;
}

/** A fault a session saw on a hop, as it classified it (src/core/route/hop-failure.ts): the kind and why. */
export interface HopFault {
  readonly kind: string;
  readonly reason: string;
}

/**
 * The mesh as a Route Session sees it. `route()` gives hops covering [0, numLayers) in
 * order, every range already loaded; `replace()` gives another peer for a lost hop's range
 * (loading it on demand), or undefined when none can take it. `reportFault` hears of a peer
 * that hung or answered something unusable (the mesh quarantines it).
 */
export interface RouteProvider {
  route(signal?: AbortSignal): Promise<HopLease[]>;
  replace(range: LayerRange, banned: ReadonlySet<string>, signal?: AbortSignal): Promise<HopLease | undefined>;
  reportFault?(peerId: string, range: LayerRange, fault: HopFault): void;
  /**
   * True when one of `hops` is in neither the current nor the previous plan (a repair's range,
   * a plan of the past) and `route()` would answer now without loading anything: the session
   * moves to a new route at its next step, so the old range can be unloaded.
   */
  offPlan?(hops: readonly { readonly peerId: string; readonly range: LayerRange }[]): boolean;
}

/** Where `--verify`'s witnesses come from (the Mesh). */
export interface VerifierSource {
  /**
   * A lease on a peer other than `suspect` that holds `range` — the head first, which loads it
   * when it must — or undefined when there is none. The caller closes the lease.
   */
  verifierFor(range: LayerRange, suspect: string, signal?: AbortSignal): Promise<HopLease | undefined>;
  /** The device a peer runs its layers on ('cpu', 'wasm', 'webgpu', 'cuda', …), for the tolerance. */
  deviceOf(peerId: string): string | undefined;
  /** The weight format a peer serves its layers in, for the tolerance. */
  weightsOf(peerId: string): WireWeights | undefined;
  /** Peers whose answers are not checked (the head's own hops). */
  trusts(peerId: string): boolean;
}
