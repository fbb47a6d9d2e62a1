/**
 * The head's `/metrics`: requests by endpoint and status, client aborts, tokens in and out,
 * time to first token, per-token and per-hop latency, live sessions, repairs (by kind and by
 * cause), peers by runtime and each peer's KV, and speculative decoding (drafts accepted and
 * rejected, route steps, and per session its acceptance rate and tokens per round trip). The
 * HTTP layer calls `requestFinished` per response (a client gone during its upload is status
 * 499, "client closed request") and
 * `clientAborted` when a client leaves before its answer ended; `sessionObserved` runs once
 * per Route Session when it closes; the mesh feed sets the peer gauges.
 */
import type { StatsMessage } from '../../shared/control.ts';
import type { RepairCause, SessionTelemetry } from '../../core/route/route-types.ts';
import { MetricsRegistry, type Counter, type Gauge, type Histogram } from './registry.ts';

/** Seconds; first tokens include tokenization, prefill over every hop and sampling. */
export const TTFT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds between tokens while decoding. */
export const TOKEN_LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** Seconds per frame on one hop (a round trip, including prefill frames). */
export const HOP_LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** A session's share of drafted tokens kept (speculative decoding). */
export const ACCEPTANCE_BUCKETS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1];
/** Generated tokens per step through the route (1 without speculation). */
export const TOKENS_PER_ROUND_TRIP_BUCKETS = [1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 9];

/** Where a client left: during its request's upload, or while its answer was being written. */
export type ClientAbortStage = 'upload' | 'answer';

const REPAIR_CAUSES: readonly RepairCause[] = ['cache_miss', 'lost', 'hung', 'faulty', 'mismatch'];

export type PeerRuntimeCounts = Partial<Record<'node' | 'browser' | 'head', number>>;

const RUNTIMES = ['node', 'browser', 'head'] as const;

export class HeadMetrics {
  private readonly requests: Counter;
  private readonly tokens: Counter;
  private readonly timeToFirstToken: Histogram;
  private readonly tokenLatency: Histogram;
  private readonly hopLatency: Histogram;
  private readonly liveSessions: Gauge;
  private readonly repairs: Counter;
  private readonly repairCauses: Counter;
  private readonly clientAborts: Counter;
  private readonly verifications: Counter;
  private readonly peers: Gauge;
  private readonly draftTokens: Counter;
  private readonly routeSteps: Counter;
  private readonly acceptance: Histogram;
  private readonly tokensPerRoundTrip: Histogram;
  private readonly kvBytes: Gauge;
  private readonly prefixBytes: Gauge;
  private readonly prefixEntries: Gauge;
  private readonly prefixBudget: Gauge;
  private readonly prefixEvictions: Gauge;
  private readonly cachedTokens: Counter;
  private readonly peerKvBytes: Gauge;
  private readonly peerKvEntries: Gauge;

  constructor(readonly registry: MetricsRegistry = new MetricsRegistry()) {
    const r = registry;
    this.requests = r.counter('meshnet_requests_total', 'HTTP API requests answered, by endpoint and status.', ['endpoint', 'status']);
    this.tokens = r.counter('meshnet_tokens_total', 'Tokens processed: prompt tokens in, generated tokens out.', ['direction']);
    this.timeToFirstToken = r.histogram('meshnet_time_to_first_token_seconds', 'Time from session start to the first generated token.', TTFT_BUCKETS);
    this.tokenLatency = r.histogram('meshnet_token_latency_seconds', 'Time per generated token after the first (session mean, once per token).', TOKEN_LATENCY_BUCKETS);
    this.hopLatency = r.histogram('meshnet_hop_latency_seconds', 'Time per activation frame on one hop of the route (session mean, once per frame).', HOP_LATENCY_BUCKETS, ['hop']);
    this.liveSessions = r.gauge('meshnet_live_sessions', 'Route Sessions running now.');
    this.repairs = r.counter('meshnet_repairs_total', 'Hops rebuilt during a session: cache_miss (re-prefill) or replaced (another peer).', ['kind']);
    this.repairCauses = r.counter(
      'meshnet_repair_causes_total',
      'Hops rebuilt during a session, by cause: cache_miss, or why the peer was replaced (lost: gone; hung: missed its deadline; faulty: an unusable answer; mismatch: --verify disagreed).',
      ['cause'],
    );
    this.clientAborts = r.counter('meshnet_client_aborts_total', 'Clients that went away: during their request upload (status 499) or while their answer was written.', ['stage']);
    this.verifications = r.counter('meshnet_verifications_total', '--verify checks of hop answers: agreed, mismatch (the peer is quarantined), skipped (no other holder, or it failed).', ['result']);
    this.peers = r.gauge('meshnet_peers', 'Peers in the mesh, by runtime.', ['runtime']);
    this.draftTokens = r.counter('meshnet_draft_tokens_total', 'Drafted tokens verified by speculative decoding: accepted (kept) or rejected.', ['result']);
    this.routeSteps = r.counter('meshnet_route_steps_total', 'Steps through the route (round trips), prefills included.');
    this.acceptance = r.histogram('meshnet_session_acceptance_rate', 'Per session that drafted: the share of drafted tokens kept.', ACCEPTANCE_BUCKETS);
    this.tokensPerRoundTrip = r.histogram('meshnet_session_tokens_per_round_trip', 'Per session: generated tokens per step through the route (1 without speculation).', TOKENS_PER_ROUND_TRIP_BUCKETS);
    for (const result of ['accepted', 'rejected']) this.draftTokens.inc({ result }, 0);
    this.routeSteps.inc({}, 0);
    this.kvBytes = r.gauge('meshnet_kv_bytes', "Live sessions' KV held by the peers (from their last stats), bytes.");
    this.prefixBytes = r.gauge('meshnet_prefix_cache_bytes', 'Prefix entries (finished sessions\' KV kept for reuse) held by the peers, bytes; apart from meshnet_kv_bytes.');
    this.prefixEntries = r.gauge('meshnet_prefix_cache_entries', 'Prefix entries held by the peers (one per peer and kept session).');
    this.prefixBudget = r.gauge('meshnet_prefix_cache_budget_bytes', "The peers' prefix-entry budgets (--prefix-cache), bytes.");
    this.prefixEvictions = r.gauge('meshnet_prefix_cache_evictions', 'Prefix entries the peers evicted for their budget (since each started).');
    this.cachedTokens = r.counter('meshnet_prompt_tokens_cached_total', "Prompt tokens taken from a prefix entry instead of prefilled (usage's cached_tokens).");
    this.peerKvBytes = r.gauge('meshnet_peer_kv_bytes', "KV cache bytes a peer holds (its last stats answer).", ['peer']);
    this.peerKvEntries = r.gauge('meshnet_peer_kv_entries', 'KV entries (one per session and range) a peer holds (its last stats answer).', ['peer']);
    for (const direction of ['in', 'out']) this.tokens.inc({ direction }, 0);
    this.cachedTokens.inc({}, 0);
    this.setKv([]);
    for (const kind of ['cache_miss', 'replaced']) this.repairs.inc({ kind }, 0);
    for (const cause of REPAIR_CAUSES) this.repairCauses.inc({ cause }, 0);
    for (const stage of ['upload', 'answer']) this.clientAborts.inc({ stage }, 0);
    for (const result of ['agreed', 'mismatch', 'skipped']) this.verifications.inc({ result }, 0);
    this.setPeers({});
  }

  /** One API response sent (`endpoint` a route pattern such as '/v1/chat/completions', never a raw URL). */
  requestFinished(endpoint: string, status: number): void {
    this.requests.inc({ endpoint, status });
    if (status === 499) this.clientAborts.inc({ stage: 'upload' });
  }

  /** A client left while its answer was being written (its session was cancelled). */
  clientAborted(stage: ClientAbortStage): void {
    this.clientAborts.inc({ stage });
  }

  /**
   * A closed Route Session: its tokens, time to first token, mean time per token after the
   * first (recorded once per such token), each hop's mean frame time (recorded once per
   * frame; hop is the position in the route, so series stay few as peers come and go) and
   * its repairs.
   */
  sessionObserved(telemetry: SessionTelemetry): void {
    this.tokens.inc({ direction: 'in' }, telemetry.promptTokens);
    this.tokens.inc({ direction: 'out' }, telemetry.completionTokens);
    const ttft = telemetry.timeToFirstTokenMs;
    if (ttft !== undefined) {
      this.timeToFirstToken.observe({}, ttft / 1000);
      const decoded = telemetry.completionTokens - 1;
      if (telemetry.finishedAt !== undefined && decoded > 0) {
        const decodeMs = telemetry.finishedAt - (telemetry.startedAt + ttft);
        if (decodeMs >= 0) this.tokenLatency.observe({}, decodeMs / decoded / 1000, decoded);
      }
    }
    telemetry.hops.forEach((hop, index) => {
      if (hop.frames > 0) this.hopLatency.observe({ hop: index }, hop.totalMs / hop.frames / 1000, hop.frames);
    });
    for (const repair of telemetry.repairs) {
      this.repairs.inc({ kind: repair.kind });
      this.repairCauses.inc({ cause: repair.cause });
    }
    const speculation = telemetry.speculation;
    if (speculation && speculation.steps > 0) {
      this.routeSteps.inc({}, speculation.steps);
      this.draftTokens.inc({ result: 'accepted' }, speculation.accepted);
      this.draftTokens.inc({ result: 'rejected' }, speculation.drafted - speculation.accepted);
      if (speculation.drafted > 0) this.acceptance.observe({}, speculation.accepted / speculation.drafted);
      this.tokensPerRoundTrip.observe({}, telemetry.completionTokens / speculation.steps);
    }
    if (telemetry.cachedTokens) this.cachedTokens.inc({}, telemetry.cachedTokens);
  }

  /** KV and prefix-entry figures summed over the peers' last stats. */
  setKv(stats: readonly StatsMessage[]): void {
    const sum = (f: (s: StatsMessage) => number | undefined) => stats.reduce((n, s) => n + (f(s) ?? 0), 0);
    this.kvBytes.set({}, sum((s) => s.kvBytes));
    this.prefixBytes.set({}, sum((s) => s.prefixBytes));
    this.prefixEntries.set({}, sum((s) => s.prefixEntries));
    this.prefixBudget.set({}, sum((s) => s.prefixBudgetBytes));
    this.prefixEvictions.set({}, sum((s) => s.prefixEvictions));
  }

  setLiveSessions(count: number): void {
    this.liveSessions.set({}, count);
  }

  /** Peers by runtime now; a runtime left out counts 0. */
  setPeers(counts: PeerRuntimeCounts): void {
    for (const runtime of RUNTIMES) this.peers.set({ runtime }, counts[runtime] ?? 0);
  }

  /** One --verify check's outcome. */
  verified(result: 'agreed' | 'mismatch' | 'skipped'): void {
    this.verifications.inc({ result });
  }

  /** A peer's KV from its last stats answer. */
  setPeerKv(peerId: string, bytes: number, entries: number): void {
    this.peerKvBytes.set({ peer: peerId }, bytes);
    this.peerKvEntries.set({ peer: peerId }, entries);
  }

  /** The peer left: its series go. */
  removePeer(peerId: string): void {
    this.peerKvBytes.remove({ peer: peerId });
    this.peerKvEntries.remove({ peer: peerId });
  }

  render(): string {
    return this.registry.render();
  }
}
