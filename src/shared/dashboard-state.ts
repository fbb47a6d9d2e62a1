/**
 * The head's live state as the dashboard sees it (`GET /api/state`), the events that change
 * it (`GET /api/events`, one SSE event per `MeshEvent`, named by its `kind`), and the pure
 * reducer `applyEvent` that folds them. The head's store and the browser run the same
 * reducer, so a snapshot followed by events gives the same state on both sides.
 *
 * Times are milliseconds since the epoch on the head's clock; durations are milliseconds.
 * The browser's check of an arriving event, `parseMeshEvent`, is in `dashboard-events.ts`.
 */
import type { LayerRange, WireDtype } from './protocol.ts';

/** Finished sessions kept, newest first. */
export const FINISHED_SESSIONS_CAP = 50;
/** Points kept in a session's tokens/s series. */
export const RATE_POINTS_CAP = 60;
/** Peers marked 'gone' kept visible; past this the longest-gone are dropped. */
export const GONE_PEERS_CAP = 50;
/** A gone peer is dropped from the state (`peer.removed`) this long after it left. */
export const GONE_PEER_TTL_MS = 60_000;

export interface ModelView {
  readonly id: string;
  readonly numLayers: number;
  readonly dtype: WireDtype;
  /** The weight format every range is served in (canonical name, e.g. `q4-b32-acc4`). */
  readonly weights?: string;
}

export type PeerRuntime = 'node' | 'browser' | 'head';
/** 'quarantined': a session saw it hang or answer something unusable; not routed until `quarantine.until`. */
export type PeerStatus = 'joining' | 'ready' | 'quarantined' | 'gone';

export interface PeerQuarantineView {
  readonly since: number;
  readonly until: number;
  readonly reason: string;
  /** Faults counted: each doubles the time out, up to a bound. */
  readonly strikes: number;
}

export interface PeerView {
  readonly id: string;
  readonly runtime: PeerRuntime;
  readonly executionProvider: string;
  /** The device the executor runs on, when the peer reported it at `ready`. */
  readonly device?: string;
  readonly layers: readonly LayerRange[]; // loaded ranges, each [start, end)
  /** The weight format of its loaded ranges (canonical name), once it loaded one. */
  readonly weights?: string;
  /** Packed weight bytes of its loaded ranges in that format. */
  readonly weightBytes?: number;
  readonly memoryBudgetBytes: number;
  readonly kvBytes: number;
  readonly kvEntries: number;
  /** Prefix entries (finished sessions' KV kept for reuse), apart from `kvBytes`: bytes, entries, budget. */
  readonly prefixBytes?: number;
  readonly prefixEntries?: number;
  readonly prefixBudgetBytes?: number;
  readonly status: PeerStatus;
  /** Present while quarantined. */
  readonly quarantine?: PeerQuarantineView;
  /** Last stats message (or the join time before any). */
  readonly lastHeartbeatAt: number;
  /** When the head saw it leave (status 'gone'); it is dropped GONE_PEER_TTL_MS later. */
  readonly goneAt?: number;
  readonly tokensServed: number;
  /** Times this id joined again: after this head saw it gone, or (3.5) the head connections the peer says it made before (a restarted head never saw it); absent before the first. */
  readonly rejoins?: number;
}

export interface RouteHopView {
  readonly peerId: string;
  readonly range: LayerRange;
}

/** The current route over [0, numLayers), hops in order; empty with `reason` when none. */
export interface RouteView {
  readonly hops: readonly RouteHopView[];
  readonly reason?: string;
}

export interface RatePoint {
  readonly t: number;
  readonly tokensPerSecond: number;
}

export interface SessionHopView {
  readonly peerId: string;
  readonly range: LayerRange;
  /** Frames this hop has answered for the session (prefill and decode, replays included). */
  readonly frames: number;
  /** Positions those frames carried (a prefill frame carries the whole prompt). */
  readonly tokens: number;
  readonly lastMs: number;
  readonly meanMs: number;
  readonly kvPositions: number;
}

export interface RepairView {
  readonly kind: 'cache_miss' | 'replaced';
  readonly hop: number;
  readonly peerId: string; // the peer serving the hop after the repair
  readonly lostPeerId?: string; // for 'replaced'
}

export type SessionState = 'running' | 'finished' | 'cancelled' | 'error';

/** A session's speculative decoding: how it drafted and how well. */
export interface SpeculationView {
  readonly mode: 'off' | 'ngram' | 'draft';
  /** Drafted tokens verified, and how many of them were kept. */
  readonly drafted: number;
  readonly accepted: number;
  /** accepted ÷ drafted (0 before any draft). */
  readonly acceptanceRate: number;
  /** Steps through the route (round trips), the prefill included. */
  readonly steps: number;
  /** Generated tokens ÷ steps: 1 without speculation. */
  readonly tokensPerRoundTrip: number;
}

export interface SessionView {
  /** The API response id (`chatcmpl-…`, `cmpl-…`), not the internal Route Session id. */
  readonly id: string;
  readonly model: string;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly startedAt: number;
  readonly timeToFirstTokenMs?: number;
  readonly tokensPerSecond: number;
  /** Oldest first, at most RATE_POINTS_CAP points. */
  readonly rate: readonly RatePoint[];
  readonly hops: readonly SessionHopView[];
  readonly repairs: readonly RepairView[];
  /** Between hop i and i + 1 as the last step flowed: `direct` (chained, peer to peer) or `head` (through the head). Absent before the first step. */
  readonly links?: readonly ('direct' | 'head')[];
  /** Present once the session has taken a step. */
  readonly speculation?: SpeculationView;
  readonly state: SessionState;
  readonly error?: string;
}

export interface TotalsView {
  readonly requests: number;
  readonly errors: number;
  readonly tokensOut: number;
  /** Across the mesh, now. */
  readonly tokensPerSecond: number;
}

export interface MeshState {
  readonly model: ModelView;
  readonly peers: readonly PeerView[];
  readonly route: RouteView;
  readonly sessions: readonly SessionView[]; // live, oldest first
  readonly finished: readonly SessionView[]; // newest first, at most FINISHED_SESSIONS_CAP
  readonly totals: TotalsView;
  readonly headStartedAt: number;
}

/**
 * What changes the state. Session events carry the whole view; on `session.updated` and
 * `session.finished` the reducer appends the view's rate points newer than the ones it has
 * (so the head may send one new point or the whole series).
 */
export type MeshEvent =
  | { readonly kind: 'snapshot'; readonly state: MeshState }
  | { readonly kind: 'peer.joined'; readonly peer: PeerView }
  | { readonly kind: 'peer.updated'; readonly peer: PeerView }
  | { readonly kind: 'peer.left'; readonly peerId: string; readonly at?: number }
  | { readonly kind: 'peer.removed'; readonly peerId: string }
  | { readonly kind: 'route.changed'; readonly route: RouteView }
  | { readonly kind: 'session.started'; readonly session: SessionView }
  | { readonly kind: 'session.updated'; readonly session: SessionView }
  | { readonly kind: 'session.finished'; readonly session: SessionView }
  | { readonly kind: 'totals'; readonly totals: TotalsView };

export type MeshEventKind = MeshEvent['kind'];

export function emptyState(
  model: ModelView = { id: '', numLayers: 0, dtype: 'fp32' },
  headStartedAt = 0,
): MeshState {
  return {
    model,
    peers: [],
    route: { hops: [] },
    sessions: [],
    finished: [],
    totals: { requests: 0, errors: 0, tokensOut: 0, tokensPerSecond: 0 },
    headStartedAt,
  };
}

/** `next` with the larger of its rejoin count (the peer's own, from its hello: 3.5) and the one `before` had. */
function withRejoins(next: PeerView, before: PeerView): PeerView {
  const rejoins = Math.max(next.rejoins ?? 0, before.rejoins ?? 0);
  return rejoins > 0 && rejoins !== next.rejoins ? { ...next, rejoins } : next;
}

/**
 * The next state after `event`. Never mutates `state` and never throws: updates for
 * unknown peers or sessions leave the state as it is. `peer.joined` adds or replaces the
 * peer (a re-joining peer replaces its gone entry and counts one more `rejoins`); `peer.left` marks it 'gone' at once —
 * no layers, no KV: it holds nothing any more — and keeps it visible until `peer.removed`
 * (which drops only a gone peer). `session.finished` moves the session (known or not) to the front of
 * `finished`, capped at FINISHED_SESSIONS_CAP.
 */
export function applyEvent(state: MeshState, event: MeshEvent): MeshState {
  switch (event.kind) {
    case 'snapshot':
      return event.state;
    case 'peer.joined': {
      const before = state.peers.find((p) => p.id === event.peer.id);
      const others = state.peers.filter((p) => p.id !== event.peer.id);
      // Seen gone here: one more rejoin; the peer's own count (3.5, a restarted head never saw it) wins when larger.
      const peer = before ? { ...event.peer, rejoins: Math.max((before.rejoins ?? 0) + 1, event.peer.rejoins ?? 0) } : event.peer;
      return { ...state, peers: [...others, peer] };
    }
    case 'peer.updated': {
      if (!state.peers.some((p) => p.id === event.peer.id && p.status !== 'gone')) return state;
      return { ...state, peers: state.peers.map((p) => (p.id === event.peer.id ? withRejoins(event.peer, p) : p)) };
    }
    case 'peer.left': {
      if (!state.peers.some((p) => p.id === event.peerId && p.status !== 'gone')) return state;
      const marked = state.peers.filter((p) => p.id !== event.peerId);
      // What it held (weights, prefix entries) goes with it; its quarantine stays on record.
      const { prefixBytes: _prefixBytes, prefixEntries: _prefixEntries, weightBytes: _weightBytes, ...last } = state.peers.find((p) => p.id === event.peerId)!;
      const gone: PeerView = { ...last, status: 'gone', layers: [], kvBytes: 0, kvEntries: 0, ...(event.at !== undefined ? { goneAt: event.at } : {}) };
      return { ...state, peers: capGone([...marked, gone]) };
    }
    case 'peer.removed': {
      if (!state.peers.some((p) => p.id === event.peerId && p.status === 'gone')) return state;
      return { ...state, peers: state.peers.filter((p) => p.id !== event.peerId) };
    }
    case 'route.changed':
      return { ...state, route: event.route };
    case 'session.started': {
      const session = { ...event.session, rate: event.session.rate.slice(-RATE_POINTS_CAP) };
      const others = state.sessions.filter((s) => s.id !== session.id);
      return { ...state, sessions: [...others, session] };
    }
    case 'session.updated': {
      const previous = state.sessions.find((s) => s.id === event.session.id);
      if (!previous) return state;
      const session = withRate(event.session, previous.rate);
      return { ...state, sessions: state.sessions.map((s) => (s.id === session.id ? session : s)) };
    }
    case 'session.finished': {
      const previous = state.sessions.find((s) => s.id === event.session.id);
      const session = withRate(event.session, previous?.rate ?? []);
      const finished = [session, ...state.finished.filter((s) => s.id !== session.id)];
      return {
        ...state,
        sessions: previous ? state.sessions.filter((s) => s !== previous) : state.sessions,
        finished: finished.slice(0, FINISHED_SESSIONS_CAP),
      };
    }
    case 'totals':
      return { ...state, totals: event.totals };
    default:
      return state; // a kind this build does not know (a newer head)
  }
}

/** `session` with `previous` extended by its points newer than the last one, capped. */
function withRate(session: SessionView, previous: readonly RatePoint[]): SessionView {
  const last = previous.length > 0 ? previous[previous.length - 1]!.t : -Infinity;
  const rate = [...previous, ...session.rate.filter((p) => p.t > last)].slice(-RATE_POINTS_CAP);
  return { ...session, rate };
}

/** Drop the earliest-marked gone peers past GONE_PEERS_CAP (gone peers are appended). */
function capGone(peers: PeerView[]): PeerView[] {
  let excess = peers.filter((p) => p.status === 'gone').length - GONE_PEERS_CAP;
  if (excess <= 0) return peers;
  return peers.filter((p) => p.status !== 'gone' || excess-- <= 0);
}
