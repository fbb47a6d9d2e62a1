/**
 * RouteSession: one request's life on a route — prefill, decode, repair, cancel, close.
 *
 * The head embeds and samples; hops run layer ranges. The unit of work is a step: a block of
 * positions (one token, a prompt, or a speculative step's last token plus its drafts) sent
 * through every hop in order. A long block over several hops is pipelined (chunks flow
 * through the hops one after another, see pipelined-prefill.ts). After each step the head
 * scores the positions it asked about (one LM head run) and `TokenOutput`, the one place
 * that samples, takes them in order: each draft is kept or replaced, the first replacement
 * ends the step. The next step starts at the first position not kept, and `rollback` — the
 * one place that commits history — cuts every hop's record there, exactly as each peer cuts
 * its KV when that step's frame arrives (the position rule, protocol 2.1).
 *
 * Each hop is a `Hop` (hop.ts): its lease, latency, history and frames. A hop that fails is
 * repaired — rebuilt from its history, or replaced — by hop-repair.ts, so only that hop
 * recomputes and the tokens are unchanged. Prefix reuse is prefix-reuse.ts.
 *
 * Finish, error and abort share one end: the outcome and finish time are recorded at once
 * (`onSettled`; a client's abort settles synchronously), then — in the background, never
 * holding up the client — every hop gets a release (its answer is recorded in telemetry) and
 * every link the session was given is closed; `closed` resolves when that is done. No frame is
 * sent once the end has begun.
 */
import { assertFiniteActivations } from '../frames/finite-activations.ts';
import type { HopLease } from '../mesh/route-provider.ts';
import { systemClock, type Clock } from '../runtime/clock.ts';
import type { Activations } from '../runtime/shard-executor.ts';
import { pickRows } from '../runtime/head-pick.ts';
import type { VerifiedSample } from '../sampling/index.ts';
import { Drafters } from '../speculation/drafters.ts';
import { Speculation } from '../speculation/speculation.ts';
import { ChainRoute } from './chain-route.ts';
import { runChained, runChainedPipelined, runSegmentsPipelined, type ChainStepContext } from './chain-step.ts';
import { runRepaired, type RepairContext } from './hop-repair.ts';
import { Hop, releaseLease, type HopContext } from './hop.ts';
import { cutChunks, prefillChunkSize, runPipelined } from './pipelined-prefill.ts';
import { PrefixReuse } from './prefix-reuse.ts';
import type { SessionEvent, SessionOutcome, SessionTelemetry } from './route-types.ts';
import type { RouteSessionDeps, RouteSessionRequest, SessionHooks, SessionPolicy } from './session-deps.ts';
import { TokenOutput } from './token-output.ts';
import { hopMark } from '../runtime/hop-trace.ts';

export type { RouteSessionDeps, RouteSessionRequest, SessionHooks, SessionPolicy } from './session-deps.ts';

type Outcome = Exclude<SessionOutcome, 'running'>;

export class RouteSession implements AsyncIterable<SessionEvent> {
  readonly telemetry: SessionTelemetry;
  /** Resolves when every hop was released (or its release timed out) and every link closed. */
  readonly closed: Promise<void>;
  private markClosed!: () => void;
  private readonly controller = new AbortController();
  private hops: Hop[] = [];
  private readonly leases: HopLease[] = []; // every lease handed to this session, to release
  private closing: Promise<void> | undefined;
  /** Tokens whose positions the hops hold, in order (prompt, then each step's block: its last token and drafts). */
  private readonly sequence: number[] = [];
  private readonly clock: Clock;
  private readonly policy: SessionPolicy;
  private readonly detach: () => void;
  private readonly speculation: Speculation;
  private readonly hop: HopContext;
  private readonly repair: RepairContext;
  private readonly prefixes: PrefixReuse | undefined;
  /** How the hops are linked (chained where they can be, protocol 3.2; star by default). */
  private readonly chain: ChainStepContext;

  constructor(
    private readonly deps: RouteSessionDeps,
    private readonly request: RouteSessionRequest,
    signal?: AbortSignal,
    private readonly hooks: SessionHooks = {},
  ) {
    const clock = (this.clock = deps.clock ?? systemClock);
    const policy = (this.policy = deps.policy ?? {});
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
    this.telemetry = {
      sessionId: request.sessionId,
      startedAt: clock.now(),
      promptTokens: request.promptIds.length,
      completionTokens: 0,
      outcome: 'running',
      hops: [],
      repairs: [],
      releases: [],
    };
    const mode = request.speculate ?? 'ngram';
    const drafter = (deps.drafters ?? new Drafters()).create(mode, request.sessionId, request.params);
    this.speculation = new Speculation(mode, drafter, policy.draftLength);
    this.telemetry.speculation = this.speculation.telemetry;
    const closing = () => this.closing !== undefined;
    this.hop = {
      sessionId: request.sessionId,
      clock,
      deadline: policy.hopTimeoutMs === undefined ? undefined : { ceilingMs: policy.hopTimeoutMs, floorMs: policy.hopFloorMs },
      onAnswer: () => this.updated(),
      closing,
    };
    this.repair = {
      route: deps.route,
      clock,
      policy,
      verifier: deps.verifier,
      banned: new Set(),
      adopt: (lease) => this.leases.push(lease),
      retire: (lease) => lease.retire?.(),
      repaired: (record) => {
        this.telemetry.repairs.push(record);
        this.updated();
      },
      closing,
    };
    this.prefixes = deps.prefixes && new PrefixReuse(deps.prefixes, this.releaseTimeoutMs);
    const chain = new ChainRoute({ sessionId: request.sessionId, clock, mode: policy.routeMode ?? 'star' });
    this.chain = { sessionId: request.sessionId, chain, repair: this.repair };
    const onAbort = () => this.abort(signal!.reason);
    this.detach = () => signal?.removeEventListener('abort', onAbort);
    if (signal?.aborted) this.abort(signal.reason);
    else signal?.addEventListener('abort', onAbort, { once: true });
  }

  get sessionId(): string {
    return this.request.sessionId;
  }

  /** Abort: the session settles as cancelled at once, sends no new frame, and releases its hops. */
  abort(reason: unknown = new DOMException('the session was aborted', 'AbortError')): void {
    if (!this.controller.signal.aborted) this.controller.abort(reason);
    void this.close('cancelled');
  }

  async *[Symbol.asyncIterator](): AsyncIterator<SessionEvent> {
    const signal = this.controller.signal;
    const { promptIds } = this.request;
    const { head, vocabSize } = this.deps;
    let output: TokenOutput | undefined;
    try {
      output = new TokenOutput(this.request.params, vocabSize, promptIds, this.deps.tokenizer, this.request.stopStrings, this.request.constraint, this.request.naturalEnd, this.deps.samplers);
      await this.openRoute(signal);
      let position = (await this.prefixes?.start(this.hops, promptIds, signal)) ?? 0;
      if (position > 0) this.telemetry.cachedTokens = position;
      let fed: readonly number[] = promptIds.slice(position); // tokens whose positions the next step fills
      this.sequence.push(...promptIds.slice(0, position));
      let first = true;
      for (;;) {
        // The first step (the prompt, or what prefix reuse left of it) drafts nothing: its last
        // token is the one a draft would follow.
        if (!first && this.deps.route.offPlan?.(this.hops)) {
          // The route runs through a range no recent plan has: move to the current one, which
          // prefills every position held so far (the tokens are unchanged; only KV is rebuilt).
          await this.moveRoute(signal);
          fed = [...this.sequence.slice(0, position), ...fed];
          position = 0;
          first = true;
        }
        const drafts = first || !this.canRollBack() ? [] : await output.fitDraft(await this.speculation.propose(output.context, output.room, signal));
        first = false;
        signal.throwIfAborted();
        const block = drafts.length === 0 ? fed : [...fed, ...drafts.map((d) => d.tokenId)];
        hopMark('head.step');
        const { hidden, offset } = await this.step(block, position, signal);
        // The hops now hold `block` at `position…` (drafts included until the next step cuts them).
        this.sequence.length = position;
        this.sequence.push(...block);
        signal.throwIfAborted();
        // Row i scores the position after fed's last token plus i drafts.
        const firstRow = fed.length - 1 - offset;
        // The rows are sampled where the head computes them (head-pick.ts: the logits need not
        // come here), except a constrained step's drafts, whose masks follow each choice here.
        const logits = drafts.length > 0 && output.constrained ? await head.logits(hidden, Array.from({ length: drafts.length + 1 }, (_, i) => firstRow + i)) : undefined;
        let picked: Promise<readonly VerifiedSample[]> | undefined;
        let kept = 0;
        for (let i = 0; i <= drafts.length; i++) {
          const { token, done, accepted } = logits
            ? await output.next(logits.subarray(i * vocabSize, (i + 1) * vocabSize), drafts[i])
            : await output.nextPicked(drafts[i], async (sampler, history, mask) => (await (picked ??= pickRows(head, hidden, firstRow, { sampler, history, mask, drafts })))[i]);
          if (accepted) kept++;
          this.telemetry.completionTokens = output.generated.length;
          this.telemetry.timeToFirstTokenMs ??= this.clock.now() - this.telemetry.startedAt;
          if (token) {
            hopMark('head.token');
            yield token;
          }
          if (done) {
            this.speculation.record(drafts.length, kept);
            this.settle('finished');
            yield this.telemetry.cachedTokens && done.type === 'done' ? { ...done, usage: { ...done.usage, cachedTokens: this.telemetry.cachedTokens } } : done;
            return;
          }
          if (!accepted) break; // a replaced draft voids the rest of the step
        }
        this.speculation.record(drafts.length, kept);
        this.updated();
        position += fed.length + kept;
        fed = [output.generated[output.generated.length - 1]];
      }
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      this.settle('error', error);
      throw error;
    } finally {
      // Reached on finish, error, abort, and when the consumer stops iterating early. The
      // releases run in the background: the consumer is answered now.
      output?.dispose();
      void this.close('cancelled');
    }
  }

  /**
   * End the session (idempotent): record `outcome` unless one was recorded, stop sending, and
   * release every hop and close every lease in the background. Returns `closed`.
   */
  close(outcome: Outcome = 'cancelled'): Promise<void> {
    this.settle(outcome);
    this.closing ??= this.releaseAll();
    return this.closing;
  }

  private get releaseTimeoutMs(): number {
    return this.policy.releaseTimeoutMs ?? 5000;
  }

  /**
   * One step of the route: embed `tokens` (positions `position…`), send them through every hop
   * in order — pipelined in chunks when the block is long and the route has several hops —
   * and return the last hop's hidden states for the block's last positions: `hidden` holds
   * positions `position + offset …` (offset 0 unless the block was cut into chunks: then the
   * last chunk's). The unit a multi-token, speculative or batched step goes through.
   */
  private async step(tokens: readonly number[], position: number, signal: AbortSignal): Promise<{ hidden: Activations; offset: number }> {
    this.rollback(position);
    let hidden = await this.deps.head.embed(tokens);
    hopMark('head.embedded');
    // The head's own output is checked too, so a refusal of a frame it sends is the peer's fault.
    assertFiniteActivations(hidden);
    const run = (hop: number, block: Activations, at: number, s: AbortSignal) => runRepaired(this.hops[hop], block, at, s, this.repair);
    const chained = await this.chain.chain.prepare(this.hops, signal);
    this.recordLinks(this.chain.chain.links(this.hops.length, chained));
    const chunk = prefillChunkSize(tokens.length, this.hops.length, this.policy.prefillChunk);
    if (chunk < tokens.length) {
      const chunks = cutChunks(hidden, position, chunk);
      const segments = chained ? this.chain.chain.segments(this.hops.length).length : 0;
      const last = segments === 1
        ? await runChainedPipelined(this.hops, chunks, signal, this.chain)
        : segments > 1
          ? await runSegmentsPipelined(this.hops, chunks, signal, this.chain)
          : await runPipelined(chunks, this.hops.length, (hop, c, s) => run(hop, c.activations, c.start, s), signal);
      return { hidden: last, offset: chunks[chunks.length - 1].start - position };
    }
    if (chained) return { hidden: await runChained(this.hops, hidden, position, signal, this.chain), offset: 0 };
    for (let i = 0; i < this.hops.length; i++) hidden = await run(i, hidden, position, signal);
    return { hidden, offset: 0 };
  }

  /**
   * The one place history is committed or rolled back: before a step at `position`, every
   * hop's record keeps exactly positions [0, position) — a speculative step's rejected drafts
   * are dropped here as each peer drops them from its KV on this step's frame, so a later
   * replay rebuilds exactly the KV the peers hold.
   */
  private rollback(position: number): void {
    for (const hop of this.hops) hop.rollBack(position);
  }

  /** Whether every hop's peer keeps the position rule (a speculative step may leave positions to drop). */
  private canRollBack(): boolean {
    return this.hops.every((hop) => hop.lease.rollback !== false);
  }

  /** The links the step takes, in telemetry when they change (the dashboard draws them). */
  private recordLinks(links: ('direct' | 'head')[]): void {
    const before = this.telemetry.links;
    if (before && before.length === links.length && before.every((l, i) => l === links[i])) return;
    this.telemetry.links = links;
    this.updated();
  }

  private updated(): void {
    this.hooks.onUpdate?.(this.telemetry);
  }

  private settle(outcome: Outcome, error?: unknown): void {
    if (this.telemetry.outcome !== 'running') return;
    // The answer is decided: the constraint's state is freed now, not after the releases.
    this.request.constraint?.dispose();
    this.telemetry.outcome = outcome;
    if (error !== undefined) this.telemetry.error = error instanceof Error ? error.message : String(error);
    this.telemetry.finishedAt = this.clock.now();
    this.updated();
    this.hooks.onSettled?.(this.telemetry);
  }

  private async releaseAll(): Promise<void> {
    if (!this.controller.signal.aborted) this.controller.abort(new DOMException('the session closed', 'AbortError'));
    this.detach();
    // A finished session's KV (every current hop holds each position of `sequence`) stays behind as a prefix entry.
    const keep = this.prefixes?.toKeep(this.telemetry.outcome === 'finished', this.sequence, this.hops);
    const current = new Map(this.hops.map((h) => [h.lease, h]));
    const keepOn = (lease: HopLease) => {
      const hop = current.get(lease);
      return keep && hop ? PrefixReuse.forHop(keep, hop) : undefined;
    };
    const releases = this.leases.map((lease) => releaseLease(lease, this.hop, this.releaseTimeoutMs, this.telemetry.releases, keepOn(lease)));
    const [kept] = await Promise.all([Promise.all(releases), this.speculation.close().catch(() => undefined)]);
    if (keep) this.prefixes!.kept(keep, this.sequence, this.hops, kept.every((k, i) => !current.has(this.leases[i]) || k > 0));
    this.updated();
    this.markClosed();
  }

  /**
   * Take a new route (RouteProvider.offPlan said the current one is off the plan) and retire the
   * old hops' leases: no more frames to them, their ranges free to unload; each stays open for
   * the release at the end (a peer refuses a session's frames once it released it, and the new
   * route may come back to it).
   */
  private async moveRoute(signal: AbortSignal): Promise<void> {
    const old = this.hops.map((hop) => hop.lease);
    this.telemetry.hops.length = 0;
    await this.openRoute(signal);
    for (const lease of old) lease.retire?.();
    this.telemetry.moves = (this.telemetry.moves ?? 0) + 1;
    this.updated();
  }

  private async openRoute(signal: AbortSignal): Promise<void> {
    const leases = await this.deps.route.route(signal);
    if (this.closing) {
      for (const lease of leases) void lease.link.close('the session closed');
      signal.throwIfAborted();
    }
    this.hops = leases.map((lease, index) => {
      this.leases.push(lease);
      const hop = new Hop(index, lease, this.hop);
      this.telemetry.hops.push(hop.telemetry);
      return hop;
    });
  }
}
