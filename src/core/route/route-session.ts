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
 * For each hop the session records the activations it sent (HopHistory), so a hop that
 * answers `cache_miss` is rebuilt by replaying its history as one prefill, and a hop whose
 * peer is lost, hangs past its deadline or answers something unusable is replaced (another
 * peer, loading that range on demand, or the head) and rebuilt the same way; a hung or faulty
 * peer is also reported to the route provider, which quarantines it. Only that hop
 * recomputes; the tokens are unchanged. `classifyHopFailure` decides which failure is which.
 *
 * Finish, error and abort share one end: the outcome and finish time are recorded at once
 * (`onSettled`; a client's abort settles synchronously), then — in the background, never
 * holding up the client — every hop gets a release (its answer is recorded in telemetry) and
 * every link the session was given is closed; `closed` resolves when that is done. No frame is
 * sent once the end has begun.
 */
import { decodeFrame, encodeFrame } from '../frames/frame-codec.ts';
import { assertFiniteActivations } from '../frames/finite-activations.ts';
import type { TextTokenizer } from '../model/tokenizer.ts';
import { sleep, systemClock, type Clock } from '../runtime/clock.ts';
import type { HeadRunner } from '../runtime/ort-head-runner.ts';
import type { Activations } from '../runtime/shard-executor.ts';
import type { SamplingParams, TokenConstraint } from '../sampling/index.ts';
import type { DraftLengthPolicy } from '../speculation/draft-length.ts';
import type { SpeculateMode } from '../speculation/drafter.ts';
import { Drafters } from '../speculation/drafters.ts';
import { Speculation } from '../speculation/speculation.ts';
import { lastPositions } from './activations-slice.ts';
import { backoffDelays } from './backoff.ts';
import { classifyHopFailure, quarantines, type HopFailure } from './hop-failure.ts';
import { HopHistory } from './hop-history.ts';
import { HopLatency } from '../mesh/hop-latency.ts';
import { cutChunks, prefillChunkSize, runPipelined } from './pipelined-prefill.ts';
import { RouteUnavailableError } from '../mesh/plan-error.ts';
import { HopDeadlineError, HopFailedError } from './route-errors.ts';
import type { PrefixMatch, PrefixRegistry } from './prefix-registry.ts';
import type { RepairCause, SessionEvent, SessionOutcome, SessionTelemetry } from './route-types.ts';
import type { HopLease, RouteProvider } from '../mesh/route-provider.ts';
import { TokenOutput } from './token-output.ts';
import type { HopVerifier } from './verify-hop.ts';

export interface RouteSessionRequest {
  readonly sessionId: string; // a lowercase UUID
  readonly promptIds: readonly number[];
  readonly params: SamplingParams;
  readonly stopStrings?: readonly string[];
  /** How this session drafts (default 'ngram'); 'draft' needs `deps.drafters` with a draft model. */
  readonly speculate?: SpeculateMode;
  /**
   * Restricts every sampled token (JSON schema, tool-call grammar). The session owns it from
   * here: each step's mask and chosen token go through it (`TokenOutput`), and it is disposed
   * when the session's outcome is settled (finish, error or abort).
   */
  readonly constraint?: TokenConstraint;
}

/** How hard a session tries before it gives up on a hop. */
export interface SessionPolicy {
  /** Replacements tried per hop per step before the route counts as unavailable (default 3). */
  readonly maxReplacements?: number;
  /** Cache-miss rebuilds per hop per step before the hop counts as lost (default 2). */
  readonly maxRebuilds?: number;
  /** Back-off before each replacement (default 50 ms doubling to 1 s). */
  readonly backoff?: { readonly baseMs: number; readonly maxMs: number };
  /** Release answers are awaited this long, in the background (default 5 s). */
  readonly releaseTimeoutMs?: number;
  /**
   * The floor of every hop's deadline, ms (`--hop-timeout`). A frame gets at least this long,
   * more when the hop's recent latency times its positions says so; the first frame on a newly
   * loaded range has none. Undefined: no deadlines (complete-model mode has nobody to replace).
   */
  readonly hopTimeoutMs?: number;
  /**
   * Tokens per chunk of a pipelined prefill (`--prefill-chunk`); 0: never pipelined; default:
   * about 4 chunks per hop (see `prefillChunkSize`). A route of one hop is never pipelined.
   */
  readonly prefillChunk?: number;
  /** How the draft length adapts (default: up to 8 drafts, see DraftLength). */
  readonly draftLength?: Partial<DraftLengthPolicy>;
}

export interface RouteSessionDeps extends SessionPolicy {
  readonly head: HeadRunner;
  readonly route: RouteProvider;
  readonly vocabSize: number;
  /** Turns tokens into text deltas; without it events carry empty text. */
  readonly tokenizer?: TextTokenizer;
  /** Where drafters come from (default: prompt lookup only). */
  readonly drafters?: Drafters;
  /** Time and timers (deadlines, back-off, telemetry); the system clock by default. */
  readonly clock?: Clock;
  /** Observes telemetry changes (dashboard, metrics): after every frame a hop answers, every token, every repair and the close. */
  readonly onUpdate?: (telemetry: SessionTelemetry) => void;
  /** Called once, synchronously, when the outcome is recorded (before the hops are released). */
  readonly onSettled?: (telemetry: SessionTelemetry) => void;
  /**
   * Prefix reuse: start from the longest prefix entry the route's hops hold (fork, then
   * prefill only the rest), and leave a finished session's KV behind as a new entry.
   */
  readonly prefixes?: PrefixRegistry;
  /** `--verify`: checks a sampled share of hop answers against a replay elsewhere (verify-hop.ts). */
  readonly verifier?: HopVerifier;
}

interface HopState {
  lease: HopLease;
  latency: HopLatency;
  readonly history: HopHistory;
  stale: boolean; // the peer lacks this session's KV: replay the history before the next step
}

type Outcome = Exclude<SessionOutcome, 'running'>;

/** The first `tokens` positions of a block (a view). */
function firstPositions(a: Activations, tokens: number): Activations {
  return { ...a, data: a.data.subarray(0, tokens * a.hiddenSize) as Float32Array | Uint16Array, tokens };
}

export class RouteSession implements AsyncIterable<SessionEvent> {
  readonly telemetry: SessionTelemetry;
  /** Resolves when every hop was released (or its release timed out) and every link closed. */
  readonly closed: Promise<void>;
  private markClosed!: () => void;
  private readonly controller = new AbortController();
  private hops: HopState[] = [];
  private readonly leases: HopLease[] = []; // every lease handed to this session, to release
  private readonly banned = new Set<string>();
  private closing: Promise<void> | undefined;
  /** Tokens whose positions the hops hold, in order (prompt, then each step's block: its last token and drafts). */
  private readonly sequence: number[] = [];
  private readonly clock: Clock;
  private readonly detach: () => void;
  private readonly speculation: Speculation;

  constructor(
    private readonly deps: RouteSessionDeps,
    private readonly request: RouteSessionRequest,
    signal?: AbortSignal,
  ) {
    this.clock = deps.clock ?? systemClock;
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
    this.telemetry = {
      sessionId: request.sessionId,
      startedAt: this.clock.now(),
      promptTokens: request.promptIds.length,
      completionTokens: 0,
      outcome: 'running',
      hops: [],
      repairs: [],
      releases: [],
    };
    const mode = request.speculate ?? 'ngram';
    const drafter = (deps.drafters ?? new Drafters()).create(mode, request.sessionId, request.params);
    this.speculation = new Speculation(mode, drafter, deps.draftLength);
    this.telemetry.speculation = this.speculation.telemetry;
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
    try {
      if (promptIds.length === 0) throw new RangeError('the prompt has no tokens');
      const output = new TokenOutput(this.request.params, vocabSize, promptIds, this.deps.tokenizer, this.request.stopStrings, this.request.constraint);
      await this.openRoute(signal);
      let position = await this.reusePrefix(signal);
      let fed: readonly number[] = promptIds.slice(position); // tokens whose positions the next step fills
      this.sequence.push(...promptIds.slice(0, position));
      let first = true;
      for (;;) {
        // The first step (the prompt, or what prefix reuse left of it) drafts nothing: its last
        // token is the one a draft would follow.
        const drafts = first || !this.canRollBack() ? [] : await output.fitDraft(await this.speculation.propose(output.context, output.room, signal));
        first = false;
        signal.throwIfAborted();
        const block = drafts.length === 0 ? fed : [...fed, ...drafts.map((d) => d.tokenId)];
        const { hidden, offset } = await this.step(block, position, signal);
        // The hops now hold `block` at `position…` (drafts included until the next step cuts them).
        this.sequence.length = position;
        this.sequence.push(...block);
        signal.throwIfAborted();
        // Row i scores the position after fed's last token plus i drafts.
        const firstRow = fed.length - 1 - offset;
        const logits = await head.logits(hidden, Array.from({ length: drafts.length + 1 }, (_, i) => firstRow + i));
        let kept = 0;
        for (let i = 0; i <= drafts.length; i++) {
          const { token, done, accepted } = await output.next(logits.subarray(i * vocabSize, (i + 1) * vocabSize), drafts[i]);
          if (accepted) kept++;
          this.telemetry.completionTokens = output.generated.length;
          this.telemetry.timeToFirstTokenMs ??= this.clock.now() - this.telemetry.startedAt;
          if (token) yield token;
          if (done) {
            this.speculation.record(drafts.length, kept);
            this.settle('finished');
            yield this.telemetry.cachedTokens && done.type === 'done' ? { ...done, usage: { ...done.usage, cachedTokens: this.telemetry.cachedTokens } } : done;
            return;
          }
          if (!accepted) break; // a replaced draft voids the rest of the step
        }
        this.speculation.record(drafts.length, kept);
        this.deps.onUpdate?.(this.telemetry);
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
    // The head's own output is checked too, so a refusal of a frame it sends is the peer's fault.
    assertFiniteActivations(hidden);
    const chunk = prefillChunkSize(tokens.length, this.hops.length, this.deps.prefillChunk);
    if (chunk < tokens.length) {
      const chunks = cutChunks(hidden, position, chunk);
      const last = await runPipelined(chunks, this.hops.length, (hop, c, s) => this.runHop(hop, c.activations, c.start, s), signal);
      return { hidden: last, offset: chunks[chunks.length - 1].start - position };
    }
    for (let i = 0; i < this.hops.length; i++) hidden = await this.runHop(i, hidden, position, signal);
    return { hidden, offset: 0 };
  }

  /**
   * The one place history is committed or rolled back: before a step at `position`, every
   * hop's record keeps exactly positions [0, position) — a speculative step's rejected drafts
   * are dropped here as each peer drops them from its KV on this step's frame, so a later
   * replay rebuilds exactly the KV the peers hold.
   */
  private rollback(position: number): void {
    for (const [i, hop] of this.hops.entries()) {
      if (hop.history.length > position) hop.history.truncate(position);
      this.telemetry.hops[i].kvPositions = Math.min(this.telemetry.hops[i].kvPositions, position);
    }
  }

  /** Whether every hop's peer keeps the position rule (a speculative step may leave positions to drop). */
  private canRollBack(): boolean {
    return this.hops.every((hop) => hop.lease.rollback !== false);
  }

  private settle(outcome: Outcome, error?: unknown): void {
    if (this.telemetry.outcome !== 'running') return;
    // The answer is decided: the constraint's state is freed now, not after the releases.
    this.request.constraint?.dispose();
    this.telemetry.outcome = outcome;
    if (error !== undefined) this.telemetry.error = error instanceof Error ? error.message : String(error);
    this.telemetry.finishedAt = this.clock.now();
    this.deps.onUpdate?.(this.telemetry);
    this.deps.onSettled?.(this.telemetry);
  }

  private async releaseAll(): Promise<void> {
    if (!this.controller.signal.aborted) this.controller.abort(new DOMException('the session closed', 'AbortError'));
    this.detach();
    const timeoutMs = this.deps.releaseTimeoutMs ?? 5000;
    // A finished session's KV (every current hop holds each position of `sequence`) stays behind as a prefix entry.
    const length = this.sequence.length;
    const keep = this.deps.prefixes && this.telemetry.outcome === 'finished' && length > 0 && this.hops.length > 0 && this.hops.every((h) => !h.stale && h.history.length === length)
      ? { prefixId: globalThis.crypto.randomUUID(), length }
      : undefined;
    const current = new Set(this.hops.map((h) => h.lease));
    const [kept] = await Promise.all([Promise.all(this.leases.map((lease) => this.release(lease, timeoutMs, current.has(lease) ? keep : undefined))), this.speculation.close().catch(() => undefined)]);
    if (keep && kept.every((k, i) => !current.has(this.leases[i]) || k > 0)) {
      this.deps.prefixes!.add({
        prefixId: keep.prefixId,
        tokens: this.sequence.slice(),
        hops: this.hops.map((h) => ({ peerId: h.lease.peerId, range: h.lease.range })),
        inputs: this.hops.map((h) => h.history.replay()),
      });
    }
    this.deps.onUpdate?.(this.telemetry);
    this.markClosed();
  }

  /** Release one lease (keeping its KV as a prefix entry when asked); resolves to the prefix entries the peer kept. */
  private async release(lease: HopLease, timeoutMs: number, keepPrefix?: { prefixId: string; length: number }): Promise<number> {
    const timeout = new AbortController();
    const cancel = this.clock.setTimeout(() => timeout.abort(new Error(`no 'released' within ${timeoutMs} ms`)), timeoutMs);
    let kept = 0;
    try {
      const answer = await lease.link.control({ kind: 'release', sessionId: this.request.sessionId, ...(keepPrefix && { keepPrefix }) }, timeout.signal);
      kept = answer.kind === 'released' ? (answer.keptPrefixes ?? 0) : 0;
      this.telemetry.releases.push({ peerId: lease.peerId, freedEntries: answer.kind === 'released' ? answer.freedEntries : undefined, ...(keepPrefix && { keptPrefixes: kept }) });
    } catch (error) {
      this.telemetry.releases.push({ peerId: lease.peerId, error: error instanceof Error ? error.message : String(error) });
    } finally {
      cancel();
    }
    await lease.link.close('session closed');
    return kept;
  }

  /**
   * Start from the longest prefix entry every hop of the route holds: each hop forks the
   * session's KV from it (a copy: the entry is never written) and its history gets the
   * entry's recorded inputs, so a later cache miss replays as usual. Returns the positions
   * reused (0: none matched, or a hop no longer held the entry and the session starts cold).
   */
  private async reusePrefix(signal: AbortSignal): Promise<number> {
    const registry = this.deps.prefixes;
    if (!registry || this.hops.length === 0) return 0;
    const match = registry.match(this.request.promptIds, this.hops.map((h) => ({ peerId: h.lease.peerId, range: h.lease.range })));
    if (!match) return 0;
    const forked = await Promise.all(this.hops.map((hop) => this.fork(hop, match, signal)));
    signal.throwIfAborted();
    const reused = forked.every(Boolean);
    registry.settle(match, reused);
    if (!reused) return 0;
    this.hops.forEach((hop, i) => hop.history.record(0, firstPositions(match.entry.inputs[i], match.length)));
    this.telemetry.cachedTokens = match.length;
    return match.length;
  }

  private async fork(hop: HopState, match: PrefixMatch, signal: AbortSignal): Promise<boolean> {
    // A fork is a copy on the peer: it gets the release timeout, then the session starts cold.
    const timeoutMs = this.deps.releaseTimeoutMs ?? 5000;
    const deadline = new AbortController();
    const onAbort = () => deadline.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const cancel = this.clock.setTimeout(() => deadline.abort(new Error(`no 'forked' within ${timeoutMs} ms`)), timeoutMs);
    try {
      const answer = await hop.lease.link.control({ kind: 'fork', sessionId: this.request.sessionId, prefixId: match.entry.prefixId, range: hop.lease.range, length: match.length }, deadline.signal);
      return answer.kind === 'forked' && answer.length === match.length;
    } catch {
      return false; // evicted (cache_miss), too slow, or the peer cannot: this hop prefills from 0
    } finally {
      cancel();
      signal.removeEventListener('abort', onAbort);
    }
  }

  private async openRoute(signal: AbortSignal): Promise<void> {
    const leases = await this.deps.route.route(signal);
    if (this.closing) {
      for (const lease of leases) void lease.link.close('the session closed');
      signal.throwIfAborted();
    }
    this.hops = leases.map((lease) => this.adopt(lease));
  }

  private adopt(lease: HopLease): HopState {
    this.leases.push(lease);
    this.telemetry.hops.push({ peerId: lease.peerId, range: lease.range, frames: 0, tokens: 0, totalMs: 0, lastMs: 0, kvPositions: 0 });
    return { lease, latency: lease.latency ?? new HopLatency(), history: new HopHistory(), stale: false };
  }

  /** Send `hidden` (positions from `position`) to hop `index`, repairing the hop until it answers. */
  private async runHop(index: number, hidden: Activations, position: number, signal: AbortSignal): Promise<Activations> {
    const hop = this.hops[index];
    hop.history.record(position, hidden);
    let rebuilds = 0;
    let replacements = 0;
    const maxRebuilds = this.deps.maxRebuilds ?? 2;
    const maxReplacements = this.deps.maxReplacements ?? 3;
    for (;;) {
      signal.throwIfAborted();
      try {
        let answer: Activations;
        if (hop.stale) {
          const replayed = await this.send(index, hop.history.replay(), 0, signal);
          hop.stale = false;
          answer = lastPositions(replayed, hidden.tokens);
        } else answer = await this.send(index, hidden, position, signal);
        // --verify: a sampled answer is checked against a replay elsewhere; a mismatch throws (→ 'mismatch').
        await this.deps.verifier?.check({ hop: index, peerId: hop.lease.peerId, range: hop.lease.range, history: hop.history, answer }, signal);
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
            this.repair('cache_miss', 'cache_miss', index, hop.lease.peerId, undefined, failure.reason);
            continue;
          }
          failure = { kind: 'lost', reason: `${failure.reason} (still missing after ${rebuilds} rebuilds)` };
        }
        if (failure.kind === 'fatal') throw error;
        const { start, end } = hop.lease.range;
        if (replacements >= maxReplacements) throw new RouteUnavailableError(`layers [${start}, ${end}) lost ${replacements} peers: ${failure.reason}`);
        replacements++;
        if (quarantines(failure)) this.deps.route.reportFault?.(hop.lease.peerId, hop.lease.range, failure);
        await this.replaceHop(index, replacements, failure, signal);
      }
    }
  }

  private async replaceHop(index: number, attempt: number, failure: HopFailure, signal: AbortSignal): Promise<void> {
    const hop = this.hops[index];
    const lost = hop.lease.peerId;
    const { start, end } = hop.lease.range;
    this.banned.add(lost);
    const delays = backoffDelays({ baseMs: this.deps.backoff?.baseMs ?? 50, maxMs: this.deps.backoff?.maxMs ?? 1000, attempts: attempt });
    await sleep(this.clock, delays[attempt - 1], signal);
    const lease = await this.deps.route.replace(hop.lease.range, this.banned, signal);
    if (!lease) throw new RouteUnavailableError(`no peer can take layers [${start}, ${end}) after losing ${lost} (${failure.reason})`);
    if (this.closing) {
      void lease.link.close('the session closed');
      signal.throwIfAborted();
    }
    this.leases.push(lease);
    hop.lease = lease;
    hop.latency = lease.latency ?? new HopLatency();
    hop.stale = true;
    this.telemetry.hops[index].peerId = lease.peerId;
    this.repair('replaced', failure.kind as RepairCause, index, lease.peerId, lost, `${failure.kind}: ${failure.reason}`);
  }

  private repair(kind: 'cache_miss' | 'replaced', cause: RepairCause, hop: number, peerId: string, lostPeerId: string | undefined, reason: string): void {
    const state = this.hops[hop];
    this.telemetry.repairs.push({ kind, cause, hop, range: state.lease.range, peerId, lostPeerId, position: state.history.length, reason });
    this.deps.onUpdate?.(this.telemetry);
  }

  /** One frame to one hop and its validated answer; a late answer is a HopDeadlineError. */
  private async send(index: number, hidden: Activations, position: number, signal: AbortSignal): Promise<Activations> {
    if (this.closing) throw new DOMException('the session is closing', 'AbortError');
    const hop = this.hops[index];
    const { lease } = hop;
    let frame: Uint8Array;
    try {
      // The request id is the link's to stamp (it pairs answers on its socket).
      frame = encodeFrame({ kind: position === 0 ? 'prefill' : 'decode', requestId: 0, sessionId: this.request.sessionId, startPosition: position, range: lease.range, activations: hidden });
    } catch (error) {
      throw new Error(`the head could not encode a frame for hop ${index}`, { cause: error });
    }
    const deadlineMs = this.deps.hopTimeoutMs === undefined ? undefined : hop.latency.deadlineMs(hidden.tokens, this.deps.hopTimeoutMs);
    const started = this.clock.now();
    const bytes = await this.requestWithin(index, lease, frame, signal, deadlineMs);
    const ms = this.clock.now() - started;
    const fail = (problem: string) => new HopFailedError(index, lease.peerId, problem);
    let answer;
    try {
      answer = decodeFrame(bytes);
    } catch (error) {
      throw fail(`answered with bytes that are no frame (${error instanceof Error ? error.message : String(error)})`);
    }
    if (answer.kind !== 'result' || answer.sessionId !== this.request.sessionId || answer.startPosition !== position) throw fail('answered with a frame for another request');
    if (answer.activations.tokens !== hidden.tokens || answer.activations.hiddenSize !== hidden.hiddenSize || answer.activations.dtype !== hidden.dtype) {
      throw fail('answered with activations of the wrong shape');
    }
    try {
      assertFiniteActivations(answer.activations);
    } catch (error) {
      throw fail(error instanceof Error ? error.message : String(error));
    }
    hop.latency.record(hidden.tokens, ms);
    const t = this.telemetry.hops[index];
    t.frames++;
    t.tokens += hidden.tokens;
    t.totalMs += ms;
    t.lastMs = ms;
    t.kvPositions = position + hidden.tokens;
    this.deps.onUpdate?.(this.telemetry); // per frame: a watcher sees each hop at work, not only each token
    return answer.activations;
  }

  /** `link.request`, aborted with a HopDeadlineError after `deadlineMs` on the session's clock. */
  private async requestWithin(index: number, lease: HopLease, frame: Uint8Array, signal: AbortSignal, deadlineMs: number | undefined): Promise<Uint8Array> {
    if (deadlineMs === undefined) return lease.link.request(frame, signal);
    const deadline = new AbortController();
    const onAbort = () => deadline.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const cancel = this.clock.setTimeout(() => deadline.abort(new HopDeadlineError(index, lease.peerId, deadlineMs)), deadlineMs);
    try {
      return await lease.link.request(frame, deadline.signal);
    } finally {
      cancel();
      signal.removeEventListener('abort', onAbort);
    }
  }
}
