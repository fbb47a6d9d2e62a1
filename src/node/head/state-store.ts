/**
 * The head's live MeshState: events go in through `apply` (folded by the shared reducer),
 * and out to every subscriber — `/api/events` subscribes one listener per SSE client and
 * sends `snapshotEvent()` first. Plus the helpers that turn the mesh's and the Route
 * Sessions' own data (MeshPeer, stats, SessionTelemetry) into the dashboard's views.
 */
import { weightSpecName } from '../../core/model/quant/weight-format.ts';
import type { MeshPeer } from '../../core/mesh/mesh.ts';
import type { SessionTelemetry } from '../../core/route/route-types.ts';
import type { HopLease } from '../../core/mesh/route-provider.ts';
import type { SpeculationTelemetry } from '../../core/speculation/speculation.ts';
import type { StatsMessage } from '../../shared/control.ts';
import {
  applyEvent,
  emptyState,
  type MeshEvent,
  type MeshState,
  type PeerView,
  type RouteView,
  type SessionView,
  type SpeculationView,
} from '../../shared/dashboard-state.ts';

/** Called after each applied event with the state it produced. */
export type MeshStateListener = (event: MeshEvent, state: MeshState) => void;

export interface MeshStateStoreOptions {
  readonly initial?: MeshState;
  /** A listener threw; the others still ran. Default: ignore. */
  readonly onError?: (error: unknown) => void;
}

export class MeshStateStore {
  private current: MeshState;
  private readonly listeners = new Set<MeshStateListener>();
  private readonly onError: (error: unknown) => void;

  constructor(options: MeshStateStoreOptions = {}) {
    this.current = options.initial ?? emptyState();
    this.onError = options.onError ?? (() => {});
  }

  get state(): MeshState {
    return this.current;
  }

  /** The whole state as one event: what a new subscriber receives first. */
  snapshotEvent(): MeshEvent {
    return { kind: 'snapshot', state: this.current };
  }

  /** Fold `event` into the state, then tell every subscriber (in subscription order). */
  apply(event: MeshEvent): MeshState {
    this.current = applyEvent(this.current, event);
    for (const listener of [...this.listeners]) {
      try {
        listener(event, this.current);
      } catch (error) {
        this.onError(error);
      }
    }
    return this.current;
  }

  /** Hear every event applied from now on; call the returned function to stop. */
  subscribe(listener: MeshStateListener): () => void {
    const own = (event: MeshEvent, state: MeshState) => listener(event, state); // a listener may subscribe twice
    this.listeners.add(own);
    return () => {
      this.listeners.delete(own);
    };
  }
}

/**
 * A session's view at `now` from its Route Session telemetry. Tokens per second is the
 * decode rate: tokens after the first over the time since the first (counting the first
 * token, which came at the end of prefill, would overstate early rates); 0 before two
 * tokens. `rate` holds the one point for `now`; the reducer appends it to the series.
 */
export function sessionView(apiId: string, model: string, telemetry: SessionTelemetry, now: number): SessionView {
  const end = telemetry.finishedAt ?? now;
  const ttft = telemetry.timeToFirstTokenMs;
  const decodeMs = ttft === undefined ? 0 : end - (telemetry.startedAt + ttft);
  const tokensPerSecond = decodeMs > 0 && telemetry.completionTokens > 1 ? ((telemetry.completionTokens - 1) * 1000) / decodeMs : 0;
  return {
    id: apiId,
    model,
    promptTokens: telemetry.promptTokens,
    completionTokens: telemetry.completionTokens,
    startedAt: telemetry.startedAt,
    ...(ttft !== undefined ? { timeToFirstTokenMs: ttft } : {}),
    tokensPerSecond,
    rate: [{ t: end, tokensPerSecond }],
    hops: telemetry.hops.map((hop) => ({
      peerId: hop.peerId,
      range: { start: hop.range.start, end: hop.range.end },
      frames: hop.frames,
      tokens: hop.tokens,
      lastMs: hop.lastMs,
      meanMs: hop.frames > 0 ? hop.totalMs / hop.frames : 0,
      kvPositions: hop.kvPositions,
    })),
    repairs: telemetry.repairs.map((repair) => ({
      kind: repair.kind,
      hop: repair.hop,
      peerId: repair.peerId,
      ...(repair.lostPeerId !== undefined ? { lostPeerId: repair.lostPeerId } : {}),
    })),
    ...(telemetry.links ? { links: [...telemetry.links] } : {}),
    ...(telemetry.speculation && telemetry.speculation.steps > 0 ? { speculation: speculationView(telemetry.speculation, telemetry.completionTokens) } : {}),
    state: telemetry.outcome,
    ...(telemetry.error !== undefined ? { error: telemetry.error } : {}),
  };
}

/** Acceptance rate and tokens per round trip from a session's counts. */
export function speculationView(s: SpeculationTelemetry, completionTokens: number): SpeculationView {
  return {
    mode: s.mode,
    drafted: s.drafted,
    accepted: s.accepted,
    acceptanceRate: s.drafted > 0 ? s.accepted / s.drafted : 0,
    steps: s.steps,
    tokensPerRoundTrip: s.steps > 0 ? completionTokens / s.steps : 0,
  };
}

/**
 * A peer's view: 'quarantined' while it is, else 'ready' once it holds a range, else
 * 'joining'. KV and tokens come from
 * its last `stats` message (0 before any); `lastHeartbeatAt` is when that arrived, else
 * the join time. Its weight bytes are its layers × `bytesPerLayer` (the packed bytes of one
 * layer in the mesh's format), once it loaded a range.
 */
export function peerView(peer: MeshPeer, stats?: StatsMessage, lastHeartbeatAt?: number, bytesPerLayer?: number): PeerView {
  const layerCount = peer.ranges.reduce((n, r) => n + r.end - r.start, 0);
  return {
    id: peer.id,
    runtime: peer.runtime,
    executionProvider: peer.executionProvider,
    ...(peer.device !== undefined ? { device: peer.device } : {}),
    layers: peer.ranges.map((r) => ({ start: r.start, end: r.end })),
    ...(peer.weights !== undefined ? { weights: weightSpecName(peer.weights) } : {}),
    ...(peer.weights !== undefined && bytesPerLayer !== undefined ? { weightBytes: layerCount * bytesPerLayer } : {}),
    memoryBudgetBytes: peer.memoryBudgetBytes,
    kvBytes: stats?.kvBytes ?? 0,
    kvEntries: stats?.kvEntries ?? 0,
    ...(stats?.prefixBytes !== undefined && { prefixBytes: stats.prefixBytes, prefixEntries: stats.prefixEntries ?? 0, prefixBudgetBytes: stats.prefixBudgetBytes ?? 0 }),
    status: peer.quarantine ? 'quarantined' : peer.ranges.length > 0 ? 'ready' : 'joining',
    ...(peer.quarantine ? { quarantine: { ...peer.quarantine } } : {}),
    lastHeartbeatAt: lastHeartbeatAt ?? peer.joinedAt,
    tokensServed: stats?.tokensServed ?? 0,
    // 3.5: a peer that says it joined a head before counts as rejoined, even on a head that never saw it.
    ...(peer.connectionsBefore !== undefined && { rejoins: peer.connectionsBefore }),
  };
}

/** The route's view from its hops (leases or plan hops), links left out. */
export function routeView(hops: readonly Pick<HopLease, 'peerId' | 'range'>[], reason?: string): RouteView {
  const view = hops.map((hop) => ({ peerId: hop.peerId, range: { start: hop.range.start, end: hop.range.end } }));
  return reason === undefined ? { hops: view } : { hops: view, reason };
}
