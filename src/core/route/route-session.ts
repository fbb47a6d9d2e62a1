/**
 * RouteSession: one request's life on a route — prefill, decode, repair, cancel, close.
 *
 * The head embeds and samples; hops run layer ranges. For each hop the session records the
 * activations it sent (HopHistory), so a hop that answers `cache_miss` is rebuilt by replaying
 * its history as one prefill, and a hop whose link drops or times out is replaced (another
 * peer, loading that range on demand, or the head) and rebuilt the same way. Only that hop
 * recomputes; the tokens are unchanged.
 *
 * Finish, error and abort share one close path that runs exactly once: no frame is sent after
 * it starts, every hop gets a release (its answer is recorded in telemetry), and every link
 * the session was given is closed.
 */
import { decodeFrame, encodeFrame } from '../frames/frame-codec.ts';
import { assertFiniteActivations } from '../frames/finite-activations.ts';
import { StreamDecoder } from '../model/stream-decoder.ts';
import type { TextTokenizer } from '../model/tokenizer.ts';
import type { HeadRunner } from '../runtime/ort-head-runner.ts';
import { isLinkFailure } from '../runtime/peer-link.ts';
import type { Activations } from '../runtime/shard-executor.ts';
import { Sampler, StopChecker, StopStringMatcher, type FinishReason, type SamplingParams } from '../sampling/index.ts';
import { isProtocolError } from '../../shared/protocol-error.ts';
import { backoffDelays } from './backoff.ts';
import { HopHistory } from './hop-history.ts';
import { HopFailedError, RouteUnavailableError } from './route-errors.ts';
import type { HopLease, RouteProvider, SessionEvent, SessionTelemetry } from './route-types.ts';
import { lastPositions } from './activations-slice.ts';

export interface RouteSessionRequest {
  readonly sessionId: string; // a lowercase UUID
  readonly promptIds: readonly number[];
  readonly params: SamplingParams;
  readonly stopStrings?: readonly string[];
}

export interface RouteSessionDeps {
  readonly head: HeadRunner;
  readonly route: RouteProvider;
  readonly vocabSize: number;
  /** Turns tokens into text deltas; without it events carry empty text. */
  readonly tokenizer?: TextTokenizer;
  /** Replacements tried per lost hop before giving up (default 3). */
  readonly maxReplacements?: number;
  /** Cache-miss rebuilds allowed per hop per step before the hop counts as failed (default 2). */
  readonly maxRebuilds?: number;
  readonly backoff?: { readonly baseMs: number; readonly maxMs: number };
  /** Release answers are awaited this long at close (default 5 s). */
  readonly releaseTimeoutMs?: number;
  readonly now?: () => number;
  /** Observes telemetry changes (dashboard, metrics): after every frame a hop answers, every token, every repair and the close. */
  readonly onUpdate?: (telemetry: SessionTelemetry) => void;
}

interface HopState {
  lease: HopLease;
  readonly history: HopHistory;
  stale: boolean; // the peer lacks this session's KV: replay the history before the next step
}

/**
 * Frame request ids are unique across every session of this head: sessions share each
 * peer's socket, and a link pairs answers with requests by this id alone. (u32, wraps.)
 */
let lastRequestId = 0;
function nextRequestId(): number {
  lastRequestId = lastRequestId >= 0xffffffff ? 1 : lastRequestId + 1;
  return lastRequestId;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });

export class RouteSession implements AsyncIterable<SessionEvent> {
  readonly telemetry: SessionTelemetry;
  private readonly controller = new AbortController();
  private hops: HopState[] = [];
  private readonly leases: HopLease[] = []; // every lease handed to this session, to close
  private readonly banned = new Set<string>();
  private closing: Promise<void> | undefined;
  private framesAfterClose = 0;
  private readonly now: () => number;

  constructor(
    private readonly deps: RouteSessionDeps,
    private readonly request: RouteSessionRequest,
    signal?: AbortSignal,
  ) {
    this.now = deps.now ?? Date.now;
    this.telemetry = {
      sessionId: request.sessionId,
      startedAt: this.now(),
      promptTokens: request.promptIds.length,
      completionTokens: 0,
      outcome: 'running',
      hops: [],
      repairs: [],
      releases: [],
    };
    if (signal) {
      if (signal.aborted) this.controller.abort(signal.reason);
      else signal.addEventListener('abort', () => this.controller.abort(signal.reason), { once: true });
    }
  }

  get sessionId(): string {
    return this.request.sessionId;
  }

  /** Frames this session tried to send after its close began (always 0; tests check it). */
  get framesSentAfterClose(): number {
    return this.framesAfterClose;
  }

  /** Abort the session: no new frames; close runs (releases, links) once. */
  abort(reason: unknown = new DOMException('the session was aborted', 'AbortError')): void {
    this.controller.abort(reason);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<SessionEvent> {
    const signal = this.controller.signal;
    const { params } = this.request;
    const sampler = new Sampler(params, this.deps.vocabSize);
    const stop = new StopChecker(params);
    const decoder = this.deps.tokenizer ? new StreamDecoder(this.deps.tokenizer) : undefined;
    const matcher = this.request.stopStrings?.length ? new StopStringMatcher(this.request.stopStrings) : undefined;
    const generated: number[] = [];
    let outcome: 'finished' | 'cancelled' | 'error' = 'error';
    try {
      if (this.request.promptIds.length === 0) throw new RangeError('the prompt has no tokens');
      this.hops = (await this.deps.route.route(signal)).map((lease) => this.adopt(lease));
      let hidden = await this.forward(await this.deps.head.embed(this.request.promptIds), 0, signal);
      let position = this.request.promptIds.length;
      for (;;) {
        signal.throwIfAborted();
        const token = sampler.sample(await this.deps.head.logits(hidden), { prompt: this.request.promptIds, generated });
        generated.push(token.tokenId);
        this.telemetry.completionTokens = generated.length;
        this.telemetry.timeToFirstTokenMs ??= this.now() - this.telemetry.startedAt;
        let finishReason: FinishReason | undefined = stop.check(token.tokenId, generated.length);
        let text = '';
        if (finishReason !== 'stop') {
          const delta = decoder?.push(token.tokenId) ?? '';
          const matched = matcher ? matcher.push(delta) : { emit: delta, stopped: false };
          text = matched.emit;
          if (matched.stopped) finishReason = 'stop';
          yield { type: 'token', tokenId: token.tokenId, text, logprob: token.logprob, topLogprobs: token.topLogprobs };
        }
        this.deps.onUpdate?.(this.telemetry);
        if (finishReason) {
          const stoppedByString = matcher?.stopped ?? false;
          let tail = '';
          if (!stoppedByString) {
            const rest = decoder?.flush() ?? '';
            tail = matcher ? matcher.push(rest).emit + (matcher.stopped ? '' : matcher.flush()) : rest;
          }
          outcome = 'finished';
          yield { type: 'done', finishReason, text: tail, usage: { promptTokens: this.request.promptIds.length, completionTokens: generated.length } };
          return;
        }
        hidden = await this.forward(await this.deps.head.embed([token.tokenId]), position, signal);
        position += 1;
      }
    } catch (error) {
      if (signal.aborted) {
        outcome = 'cancelled';
        throw signal.reason;
      }
      this.telemetry.error = error instanceof Error ? error.message : String(error);
      throw error;
    } finally {
      // Reached on finish, error, abort, and when the consumer stops iterating early.
      if (outcome !== 'finished' && !signal.aborted && this.telemetry.error === undefined) outcome = 'cancelled';
      await this.close(outcome);
    }
  }

  /** The one close path: stop sending, release every hop, close every lease. Runs once. */
  close(outcome: 'finished' | 'cancelled' | 'error' = 'cancelled'): Promise<void> {
    this.closing ??= this.runClose(outcome);
    return this.closing;
  }

  private async runClose(outcome: 'finished' | 'cancelled' | 'error'): Promise<void> {
    if (!this.controller.signal.aborted) this.controller.abort(new DOMException('the session closed', 'AbortError'));
    this.telemetry.outcome = outcome;
    const timeout = this.deps.releaseTimeoutMs ?? 5000;
    await Promise.all(
      this.leases.map(async (lease) => {
        try {
          const answer = await lease.link.control({ kind: 'release', sessionId: this.request.sessionId }, AbortSignal.timeout(timeout));
          const freedEntries = answer.kind === 'released' ? answer.freedEntries : undefined;
          this.telemetry.releases.push({ peerId: lease.peerId, freedEntries });
        } catch (error) {
          this.telemetry.releases.push({ peerId: lease.peerId, error: error instanceof Error ? error.message : String(error) });
        }
        await lease.link.close('session closed');
      }),
    );
    this.telemetry.finishedAt = this.now();
    this.deps.onUpdate?.(this.telemetry);
  }

  private adopt(lease: HopLease): HopState {
    this.leases.push(lease);
    this.telemetry.hops.push({ peerId: lease.peerId, range: lease.range, frames: 0, tokens: 0, totalMs: 0, lastMs: 0, kvPositions: 0 });
    return { lease, history: new HopHistory(), stale: false };
  }

  /** Send `hidden` (positions from `position`) through every hop in order. */
  private async forward(hidden: Activations, position: number, signal: AbortSignal): Promise<Activations> {
    let current = hidden;
    for (let i = 0; i < this.hops.length; i++) current = await this.runHop(i, current, position, signal);
    return current;
  }

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
        if (hop.stale) {
          const replayed = await this.send(index, hop.history.replay(), 0, signal);
          hop.stale = false;
          return lastPositions(replayed, hidden.tokens);
        }
        return await this.send(index, hidden, position, signal);
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        if (isProtocolError(error, 'cache_miss') && rebuilds < maxRebuilds) {
          rebuilds++;
          hop.stale = true;
          this.repair('cache_miss', index, hop.lease.peerId, undefined, error.message);
          continue;
        }
        if ((isLinkFailure(error) || isProtocolError(error, 'not_ready') || isProtocolError(error, 'unknown_session')) && replacements < maxReplacements) {
          replacements++;
          await this.replaceHop(index, replacements, error, signal);
          continue;
        }
        if (isLinkFailure(error)) throw new RouteUnavailableError(`layers [${hop.lease.range.start}, ${hop.lease.range.end}) lost ${replacements} peers: ${(error as Error).message}`);
        throw error;
      }
    }
  }

  private async replaceHop(index: number, attempt: number, cause: unknown, signal: AbortSignal): Promise<void> {
    const hop = this.hops[index];
    const lost = hop.lease.peerId;
    this.banned.add(lost);
    const delays = backoffDelays({ baseMs: this.deps.backoff?.baseMs ?? 50, maxMs: this.deps.backoff?.maxMs ?? 1000, attempts: attempt });
    await sleep(delays[attempt - 1], signal);
    const lease = await this.deps.route.replace(hop.lease.range, this.banned, signal);
    if (!lease) {
      const { start, end } = hop.lease.range;
      throw new RouteUnavailableError(`no peer can take layers [${start}, ${end}) after losing ${lost} (${cause instanceof Error ? cause.message : String(cause)})`);
    }
    this.leases.push(lease);
    hop.lease = lease;
    hop.stale = true;
    this.telemetry.hops[index].peerId = lease.peerId;
    this.repair('replaced', index, lease.peerId, lost, cause instanceof Error ? cause.message : String(cause));
  }

  private repair(kind: 'cache_miss' | 'replaced', hop: number, peerId: string, lostPeerId: string | undefined, reason: string): void {
    const state = this.hops[hop];
    this.telemetry.repairs.push({ kind, hop, range: state.lease.range, peerId, lostPeerId, position: state.history.length, reason });
    this.deps.onUpdate?.(this.telemetry);
  }

  /** One frame to one hop and its validated answer. */
  private async send(index: number, hidden: Activations, position: number, signal: AbortSignal): Promise<Activations> {
    if (this.closing) {
      this.framesAfterClose++;
      throw new DOMException('the session is closing', 'AbortError');
    }
    const { lease } = this.hops[index];
    const requestId = nextRequestId();
    const frame = encodeFrame({
      kind: position === 0 ? 'prefill' : 'decode',
      requestId,
      sessionId: this.request.sessionId,
      startPosition: position,
      range: lease.range,
      activations: hidden,
    });
    const started = this.now();
    const answer = decodeFrame(await lease.link.request(frame, signal));
    const ms = this.now() - started;
    const fail = (problem: string) => new HopFailedError(index, lease.peerId, problem);
    if (answer.kind !== 'result' || answer.requestId !== requestId || answer.sessionId !== this.request.sessionId) throw fail('answered with a frame for another request');
    if (answer.activations.tokens !== hidden.tokens || answer.activations.hiddenSize !== hidden.hiddenSize) throw fail('answered with activations of the wrong shape');
    assertFiniteActivations(answer.activations);
    const t = this.telemetry.hops[index];
    t.frames++;
    t.tokens += hidden.tokens;
    t.totalMs += ms;
    t.lastMs = ms;
    t.kvPositions = position + hidden.tokens;
    this.deps.onUpdate?.(this.telemetry); // per frame: a watcher sees each hop at work, not only each token
    return answer.activations;
  }
}
