/**
 * Hop repair: how a session gets an answer from a hop whatever its peer does. A hop that
 * answers `cache_miss` is marked stale and rebuilt on the same peer by replaying its history
 * (up to `maxRebuilds` times per step); a hop whose peer is lost, hangs past its deadline or
 * answers something unusable is replaced — another peer, loading that range on demand, or the
 * head — after a capped back-off, and rebuilt the same way (up to `maxReplacements` times per
 * step); a hung, faulty or (under `--verify`) lying peer is also reported to the route
 * provider, which quarantines it. `classifyHopFailure` decides which failure is which. Only
 * that hop recomputes; the tokens are unchanged.
 */
import { RouteUnavailableError } from '../mesh/plan-error.ts';
import type { HopLease, RouteProvider } from '../mesh/route-provider.ts';
import { sleep, type Clock } from '../runtime/clock.ts';
import type { Activations } from '../runtime/shard-executor.ts';
import { backoffDelays } from './backoff.ts';
import { classifyHopFailure, quarantines, type HopFailure } from './hop-failure.ts';
import type { Hop } from './hop.ts';
import type { RepairCause, RepairRecord } from './route-types.ts';
import type { SessionPolicy } from './session-deps.ts';
import type { HopVerifier } from './verify-hop.ts';

export interface RepairContext {
  readonly route: RouteProvider;
  readonly clock: Clock;
  readonly policy: SessionPolicy;
  readonly verifier?: HopVerifier;
  /** Peers this session gave up on: never given back to it. */
  readonly banned: Set<string>;
  /** A replacement lease was handed over: the session adopts it (to release and close it at the end). */
  adopt(lease: HopLease): void;
  /** A lease the session no longer sends frames to (a replaced hop's): its range is not leased by it any more (HopLease.retire). */
  retire(lease: HopLease): void;
  /** A repair happened (telemetry). */
  repaired(record: RepairRecord): void;
  /** True once the session is closing. */
  closing(): boolean;
}

/** Record `hidden` (positions from `position`) in `hop`'s history and get its answer, repairing the hop until it answers. */
export async function runRepaired(hop: Hop, hidden: Activations, position: number, signal: AbortSignal, ctx: RepairContext): Promise<Activations> {
  hop.history.record(position, hidden);
  let rebuilds = 0;
  let replacements = 0;
  const maxRebuilds = ctx.policy.maxRebuilds ?? 2;
  const maxReplacements = ctx.policy.maxReplacements ?? 3;
  for (;;) {
    signal.throwIfAborted();
    try {
      const answer = await hop.run(hidden, position, signal);
      // --verify: a sampled answer is checked against a replay elsewhere; a mismatch throws (→ 'mismatch').
      await ctx.verifier?.check({ hop: hop.index, peerId: hop.peerId, range: hop.range, history: hop.history, answer }, signal);
      return answer;
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      let failure = classifyHopFailure(error);
      // A prefill builds the state: an honest peer never answers it with a cache miss.
      if (failure.kind === 'cache_miss' && (hop.stale || position === 0)) failure = { kind: 'faulty', reason: `answered cache_miss to a prefill: ${failure.reason}` };
      if (failure.kind === 'cache_miss') {
        if (rebuilds < maxRebuilds) {
          rebuilds++;
          hop.stale = true;
          repaired(ctx, hop, 'cache_miss', 'cache_miss', undefined, failure.reason);
          continue;
        }
        failure = { kind: 'lost', reason: `${failure.reason} (still missing after ${rebuilds} rebuilds)` };
      }
      if (failure.kind === 'fatal') throw error;
      const { start, end } = hop.range;
      if (replacements >= maxReplacements) throw new RouteUnavailableError(`layers [${start}, ${end}) lost ${replacements} peers: ${failure.reason}`);
      replacements++;
      if (quarantines(failure)) ctx.route.reportFault?.(hop.peerId, hop.range, failure);
      await replace(hop, replacements, failure, signal, ctx);
    }
  }
}

/** Another peer for `hop`'s range, after the back-off of this `attempt`; it starts stale (rebuilt at its next run). A chained step's repair calls it too. */
export async function replace(hop: Hop, attempt: number, failure: HopFailure, signal: AbortSignal, ctx: RepairContext): Promise<void> {
  const lost = hop.peerId;
  const { start, end } = hop.range;
  ctx.banned.add(lost);
  const backoff = ctx.policy.backoff;
  const delays = backoffDelays({ baseMs: backoff?.baseMs ?? 50, maxMs: backoff?.maxMs ?? 1000, attempts: attempt });
  await sleep(ctx.clock, delays[attempt - 1], signal);
  const lease = await ctx.route.replace(hop.range, ctx.banned, signal);
  if (!lease) throw new RouteUnavailableError(`no peer can take layers [${start}, ${end}) after losing ${lost} (${failure.reason})`);
  if (ctx.closing()) {
    void lease.link.close('the session closed');
    signal.throwIfAborted();
  }
  ctx.adopt(lease);
  const old = hop.lease;
  hop.replace(lease);
  ctx.retire(old); // the lost peer's range no longer leased by this session (its release still comes at the end)
  repaired(ctx, hop, 'replaced', failure.kind as RepairCause, lost, `${failure.kind}: ${failure.reason}`);
}

function repaired(ctx: RepairContext, hop: Hop, kind: 'cache_miss' | 'replaced', cause: RepairCause, lostPeerId: string | undefined, reason: string): void {
  ctx.repaired({ kind, cause, hop: hop.index, range: hop.range, peerId: hop.peerId, lostPeerId, position: hop.history.length, reason });
}
