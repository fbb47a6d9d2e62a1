/**
 * The session table (core's RouteSessions) through its interface, without HTTP: the context
 * limit and stop tokens, the session limit (429), `--min-peers` waiting on the clock seam,
 * the slot freed synchronously on a client's abort, shutdown with live sessions, and who
 * disposes a request's token constraint.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ContextLengthError, generationLimits } from '../../src/core/model/generation-limits.ts';
import { PeerWaitError, SessionLimitError, ShuttingDownError } from '../../src/core/route/route-errors.ts';
import type { RouteSessionDeps } from '../../src/core/route/route-session.ts';
import { RouteSessions, type RouteSessionsOptions } from '../../src/core/route/route-sessions.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import type { TokenConstraint, TokenMask } from '../../src/core/sampling/index.ts';
import { mapError } from '../../src/node/openai/errors.ts';
import { ManualClock } from './manual-clock.ts';
import { GateLink } from './peer-doubles.ts';
import { collect, createPeer, inProcessMesh, PROMPT, type TestMesh, useStories } from './route-harness.ts';

const stories = useStories('route-sessions', 12);

function table(t: TestMesh, extra: Partial<Omit<RouteSessionsOptions, 'session'>> & { session?: Partial<RouteSessionDeps> } = {}): RouteSessions {
  return new RouteSessions({
    limits: generationLimits(stories.ctx.model.checkpoint.config, stories.ctx.tokenizer),
    maxSessions: 8,
    ...extra,
    session: { head: stories.ctx.head, route: t.provider, vocabSize: stories.ctx.model.checkpoint.config.vocabSize, tokenizer: stories.ctx.tokenizer, policy: { backoff: { baseMs: 0, maxMs: 0 } }, ...extra.session },
  });
}

const request = (extra: { maxTokens?: number; promptIds?: number[] } = {}) => ({ sessionId: randomUUID(), promptIds: PROMPT, sampling: { temperature: 0 }, maxTokens: 12, ...extra });

/** A mesh of two in-process peers whose links hold frames at a gate (open by default). */
function gatedMesh(): { t: TestMesh; gates: GateLink[] } {
  const gates: GateLink[] = [];
  const t = inProcessMesh(stories.ctx, 2, (_, peer) => {
    const gate = new GateLink(new InProcessLink(peer));
    gates.push(gate);
    return gate;
  });
  return { t, gates };
}

describe('the session table', () => {
  it('gives the one-process tokens for a 9-token prompt, with the model EOS as stop tokens', async () => {
    const t = inProcessMesh(stories.ctx, 2);
    const sessions = table(t);
    const session = await sessions.open(request());
    expect((await collect(session)).ids).toEqual(stories.expected);
    expect(session.telemetry.promptTokens).toBe(9);
    await session.closed;
    expect(sessions.live).toBe(0);
    expect(sessions.sessions).toEqual([]);
  });

  it('refuses a prompt plus max_tokens past the context with ContextLengthError (400 context_length_exceeded at the edge)', async () => {
    const sessions = table(inProcessMesh(stories.ctx, 1));
    const context = stories.ctx.model.checkpoint.config.maxPositionEmbeddings; // 512
    const error = await sessions.open(request({ maxTokens: context - PROMPT.length + 1 })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ContextLengthError);
    expect(error).toMatchObject({ contextLength: context, promptTokens: 9, requestedTokens: 504 });
    const http = mapError(error, { promptParam: 'messages' });
    expect([http.status, http.code, http.param]).toEqual([400, 'context_length_exceeded', 'messages']);
    expect(http.message).toBe(`This model's maximum context length is 512 tokens. However, you requested 513 tokens (9 in the messages, 504 in the completion). Please reduce the length of the messages or completion.`);
    // The default is cut to what is left; exactly the room left is fine.
    const full = await sessions.open(request({ maxTokens: context - PROMPT.length }));
    full.abort();
    await full.closed;
    const prompt = Array.from({ length: context }, () => 1);
    await expect(sessions.open(request({ promptIds: prompt, maxTokens: undefined }))).rejects.toBeInstanceOf(ContextLengthError);
    expect(sessions.live).toBe(0);
  });

  it('refuses a session past --max-sessions with SessionLimitError (429, retry after 1 s), compiling no grammar for it, and admits again once one ends', async () => {
    const { t, gates } = gatedMesh();
    const refused: SessionLimitError[] = [];
    const sessions = table(t, { maxSessions: 1, observer: { refused: (e) => refused.push(e) } });
    gates[1].open = 3; // the first session stays live at its third frame on the last hop
    const first = await sessions.open(request());
    const running = collect(first);
    await gates[1].held.promise;
    // A refused request compiles no grammar: the constraint is compiled only once admitted.
    let compiled = 0;
    const compileConstraint = async () => void compiled++;
    const error = await sessions.open({ ...request(), compileConstraint }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SessionLimitError);
    expect(compiled).toBe(0);
    const http = mapError(error);
    expect([http.status, http.type, http.code, http.retryAfterSeconds]).toEqual([429, 'requests', 'rate_limit_exceeded', 1]);
    expect(http.message).toBe('the server is running its maximum of 1 sessions; retry shortly');
    expect(refused).toHaveLength(1);
    gates[1].release();
    expect((await running).ids).toEqual(stories.expected);
    expect(sessions.live).toBe(0); // freed at the outcome, before the releases finish
    const second = await sessions.open({ ...request(), compileConstraint });
    expect(compiled).toBe(1);
    expect((await collect(second)).ids).toEqual(stories.expected);
  });

  it('a client that disconnects frees its slot synchronously: with --max-sessions 1 a retry right after is admitted 20 times out of 20', async () => {
    const { t, gates } = gatedMesh();
    const sessions = table(t, { maxSessions: 1 });
    let admitted = 0;
    for (let trial = 0; trial < 20; trial++) {
      gates[1].hold(2);
      const client = new AbortController();
      const session = await sessions.open(request(), client.signal);
      const running = collect(session).catch(() => undefined);
      await gates[1].held.promise; // mid-stream: a frame held on the last hop
      client.abort(new DOMException('the client disconnected', 'AbortError'));
      // No await between the abort and the retry: the slot must already be free.
      const retry = sessions.open(request(), new AbortController().signal);
      const next = await retry.then(
        (s) => s,
        () => undefined,
      );
      if (next) admitted++;
      next?.abort();
      await running;
      await Promise.all([session.closed, next?.closed]);
      expect(session.telemetry.outcome).toBe('cancelled');
    }
    expect(admitted).toBe(20);
    gates[1].release();
    for (const peer of t.peers.values()) expect(peer.kvEntries).toBe(0);
  });

  it('--min-peers: a request waits on the clock for peers, then gets PeerWaitError (503); a peer joining during the wait lets it through', async () => {
    const clock = new ManualClock();
    const t = inProcessMesh(stories.ctx, 0);
    const quorum = { count: 1, waitMs: 3000, joined: () => t.mesh.remotePeerCount, onChange: (l: () => void) => t.mesh.onChange(l) };
    const sessions = table(t, { session: { clock }, minPeers: quorum });
    const waiting = sessions.open(request()).catch((e: unknown) => e);
    expect(clock.nextIn).toBe(3000);
    clock.advance(3000);
    const error = await waiting;
    expect(error).toBeInstanceOf(PeerWaitError);
    expect(mapError(error)).toMatchObject({ status: 503, code: 'route_unavailable', message: "waited 3 s for 1 peer(s) to join, 0 did; open /peer in a browser or start 'meshnet peer'" });
    expect(sessions.live).toBe(0);

    const let_through = sessions.open(request());
    clock.advance(1000);
    t.mesh.addPeer({ id: 'late', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(createPeer(stories.ctx)) });
    const session = await let_through;
    expect(clock.pending).toBe(0); // the wait's timer was cancelled
    expect((await collect(session)).ids).toEqual(stories.expected);
  });

  it('shutdown with live sessions: all end as cancelled, without repairs, every hop released; new sessions are refused', async () => {
    const { t, gates } = gatedMesh();
    const sessions = table(t);
    gates[1].hold(4);
    const live = await Promise.all([sessions.open(request()), sessions.open(request())]);
    const running = live.map((s) => collect(s).catch((e: unknown) => e));
    await gates[1].held.promise;
    expect(sessions.live).toBe(2);
    await sessions.abortAll();
    for (const result of await Promise.all(running)) expect(result).toBeInstanceOf(ShuttingDownError);
    for (const session of live) {
      expect(session.telemetry.outcome).toBe('cancelled');
      expect(session.telemetry.error).toBeUndefined();
      expect(session.telemetry.repairs).toEqual([]);
      expect(session.telemetry.releases.map((r) => r.freedEntries)).toEqual([1, 1]);
    }
    expect(sessions.live).toBe(0);
    expect(t.provider.openLeases).toBe(0);
    for (const peer of t.peers.values()) expect(peer.kvEntries).toBe(0);
    await expect(sessions.open(request())).rejects.toBeInstanceOf(ShuttingDownError);
    gates[1].release();
  });

  it('owns a request\'s token constraint: every token goes through it, a settled session disposes it, a refused open too', async () => {
    /** A seam double: allows every token and records what the session told it. */
    class RecordingConstraint implements TokenConstraint {
      readonly accepted: number[] = [];
      disposed = 0;
      async nextMask(): Promise<TokenMask | undefined> {
        return undefined;
      }
      accept(tokenId: number): void {
        if (this.disposed > 0) throw new Error('used after dispose');
        this.accepted.push(tokenId);
      }
      rollback(tokens: number): void {
        this.accepted.length -= tokens; // speculation walks drafts through it and rolls them back
      }
      async fork(): Promise<TokenConstraint> {
        return new RecordingConstraint();
      }
      get finished(): boolean {
        return false;
      }
      dispose(): void {
        this.disposed++;
      }
    }
    const sessions = table(inProcessMesh(stories.ctx, 2), { maxSessions: 1 });
    const constraint = new RecordingConstraint();
    const session = await sessions.open({ ...request(), constraint });
    const { ids } = await collect(session);
    expect(ids).toEqual(stories.expected); // a mask of undefined changes nothing
    expect(constraint.accepted.slice(0, ids.length)).toEqual(ids);
    expect(constraint.disposed).toBe(1);
    await session.closed;
    expect(constraint.disposed).toBe(1);

    const holder = await sessions.open(request());
    const refused = new RecordingConstraint();
    expect(await sessions.open({ ...request(), constraint: refused }).catch((e: unknown) => e)).toBeInstanceOf(SessionLimitError);
    expect(refused.disposed).toBe(1);
    holder.abort();
    await holder.closed;
  });
});
