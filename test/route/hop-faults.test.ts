/**
 * Faulty and hung peers, through the Route Session interface without HTTP, over real
 * ShardPeers behind real in-process links, with a 9-token prompt checked against one
 * process: a hop that answers NaN, the wrong shape, another request's frame, garbage bytes or
 * an internal error, or does not answer within its deadline (the clock seam, no sleeping), is
 * replaced with the tokens unchanged; the mesh quarantines the peer, the next session is
 * routed elsewhere, and the back-off lets the peer back in. Peers that never get ready are
 * dropped from the plan.
 */
import { describe, expect, it } from 'vitest';
import { DEADLINE_FLOOR_MS } from '../../src/core/mesh/hop-latency.ts';
import { RouteUnavailableError } from '../../src/core/mesh/plan-error.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { mapError } from '../../src/node/openai/errors.ts';
import { ManualClock } from './manual-clock.ts';
import { FaultyPeer, type PeerFault, SilentAssignLink } from './peer-doubles.ts';
import { collect, greedy, inProcessMesh, openSession, PROMPT, useStories } from './route-harness.ts';

const TOKENS = 16;
const stories = useStories('hop-faults', TOKENS);

/** Three peers; p2 (layers [2, 4)) answers `fault` from its 7th frame on. */
function meshWithFaultyP2(fault: PeerFault, clock?: ManualClock) {
  let faulty!: FaultyPeer;
  const t = inProcessMesh(
    stories.ctx,
    3,
    (id, peer) => {
      if (id !== 'p2') return new InProcessLink(peer);
      faulty = new FaultyPeer(peer, fault, 6);
      return new InProcessLink(faulty);
    },
    { clock },
  );
  return { t, faulty };
}

const routed = (session: { telemetry: { hops: { peerId: string }[] } }) => session.telemetry.hops.map((h) => h.peerId);

describe('a faulty hop is replaced and its peer quarantined', () => {
  const faults: [PeerFault, RegExp][] = [
    ['nan', /NaN/],
    ['shape', /wrong shape/],
    ['foreign-request', /frame of request/],
    ['garbage', /frame/],
    ['internal', /GPU out of memory/],
  ];
  for (const [fault, reason] of faults) {
    it(`${fault}: replaced, identical tokens, p2 quarantined, the next session routed elsewhere`, async () => {
      const { t } = meshWithFaultyP2(fault);
      const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, {}, PROMPT);
      expect(routed(session)).toEqual([]);
      const { ids } = await collect(session);
      expect(ids).toEqual(stories.expected);
      const replaced = session.telemetry.repairs.filter((r) => r.kind === 'replaced');
      expect(replaced).toEqual([expect.objectContaining({ hop: 1, lostPeerId: 'p2', reason: expect.stringMatching(/^faulty: /) })]);
      expect(replaced[0].reason).toMatch(reason);
      expect(['p1', 'p3']).toContain(replaced[0].peerId);
      const p2 = t.mesh.peers.find((p) => p.id === 'p2')!;
      expect(p2.quarantine).toMatchObject({ strikes: 1, reason: expect.stringMatching(/^faulty on layers \[2, 4\)/) });

      const next = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, {}, PROMPT);
      expect((await collect(next)).ids).toEqual(stories.expected);
      expect(routed(next)).not.toContain('p2');
      expect(next.telemetry.repairs).toEqual([]);
      await Promise.all([session.closed, next.closed]);
      for (const id of ['p1', 'p3']) expect(t.peers.get(id)!.kvEntries).toBe(0);
    });
  }
});

describe('a hung hop is detected by its deadline (the clock seam)', () => {
  it('a hop silent past its deadline is replaced, identical tokens, quarantined; the back-off lets it back in', async () => {
    const clock = new ManualClock();
    const { t, faulty } = meshWithFaultyP2('silent', clock);
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { clock, hopTimeoutMs: 5000, backoff: { baseMs: 0, maxMs: 0 } }, PROMPT);
    const running = collect(session);
    await faulty.tripped.promise; // p2 holds its 7th frame and will never answer
    // The adaptive deadline is its floor here: p2 answered in 0 ms on this clock, so
    // DEADLINE_SLACK × its p99 is less, and --hop-timeout (5 s) is only the ceiling.
    expect(clock.nextIn).toBe(DEADLINE_FLOOR_MS);
    clock.advance(DEADLINE_FLOOR_MS - 1);
    await new Promise((resolve) => setImmediate(resolve)); // anything an early timer started has had its turn
    expect(session.telemetry.repairs).toEqual([]);
    clock.advance(1);
    expect((await running).ids).toEqual(stories.expected);
    expect(session.telemetry.repairs).toEqual([expect.objectContaining({ kind: 'replaced', hop: 1, lostPeerId: 'p2', reason: expect.stringMatching(new RegExp(`^hung: .*did not answer within ${DEADLINE_FLOOR_MS} ms`)) })]);
    const p2 = () => t.mesh.peers.find((p) => p.id === 'p2')!;
    expect(p2().quarantine).toMatchObject({ strikes: 1, until: clock.now() + 10_000 });
    expect(t.mesh.plan().hops.map((h) => h.peerId)).not.toContain('p2');

    // The back-off ends: p2 is planned again (and, healed, serves).
    faulty.heal();
    clock.advance(10_000);
    expect(p2().quarantine).toBeUndefined();
    expect(t.mesh.plan().hops.map((h) => h.peerId)).toContain('p2');
    const later = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { clock, hopTimeoutMs: 5000 }, PROMPT);
    expect((await collect(later)).ids).toEqual(stories.expected);
    expect(routed(later)).toContain('p2');
  });

  it('a second fault doubles the time out', async () => {
    const clock = new ManualClock();
    const t = inProcessMesh(stories.ctx, 2, undefined, { clock });
    const failure = { kind: 'hung' as const, reason: 'test' };
    t.mesh.reportFault('p1', { start: 0, end: 3 }, failure);
    expect(t.mesh.peers[0].quarantine).toMatchObject({ strikes: 1, until: clock.now() + 10_000 });
    t.mesh.reportFault('p1', { start: 0, end: 3 }, failure); // seen again while quarantined: counted once
    expect(t.mesh.peers[0].quarantine?.strikes).toBe(1);
    clock.advance(10_000);
    expect(t.mesh.peers[0].quarantine).toBeUndefined();
    t.mesh.reportFault('p1', { start: 0, end: 3 }, failure);
    expect(t.mesh.peers[0].quarantine).toMatchObject({ strikes: 2, until: clock.now() + 20_000 });
  });

  it('when the quarantined peer is the only way to cover its range, the request gets route_unavailable (503) naming the range', async () => {
    const clock = new ManualClock();
    let faulty!: FaultyPeer;
    const t = inProcessMesh(stories.ctx, 1, (_, peer) => new InProcessLink((faulty = new FaultyPeer(peer, 'internal', 6))), { clock });
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { clock, backoff: { baseMs: 0, maxMs: 0 } }, PROMPT);
    await expect(collect(session)).rejects.toThrow(/no peer can take layers \[0, 5\) after losing p1/);
    expect(session.telemetry.outcome).toBe('error');

    const next = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { clock }, PROMPT);
    const error = await collect(next).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RouteUnavailableError);
    expect((error as Error).message).toMatch(/layers \[0, 5\) are held only by quarantined peer p1 \(faulty on layers \[0, 5\).*back in 10 s\)/);
    expect(mapError(error)).toMatchObject({ status: 503, code: 'route_unavailable' });

    faulty.heal();
    clock.advance(10_000);
    const after = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { clock }, PROMPT);
    expect((await collect(after)).ids).toEqual(stories.expected);
  });
});

describe('only ready peers are routed', () => {
  it('a peer that says hello but never answers assign is dropped from the plan after the ready deadline', async () => {
    const clock = new ManualClock();
    let silent!: SilentAssignLink;
    const t = inProcessMesh(stories.ctx, 2, (id, peer) => (id === 'p2' ? (silent = new SilentAssignLink(new InProcessLink(peer))) : new InProcessLink(peer)), { clock, readyTimeoutMs: 2000 });
    expect(t.mesh.plan().hops.map((h) => h.peerId)).toEqual(['p1', 'p2']); // planned, but not ready
    expect(t.mesh.routeReady()).toBe(false);
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { clock }, PROMPT);
    const running = collect(session);
    // p1 gets ready (real loading takes real time); only then does the clock move.
    const p1 = t.mesh.peers.find((p) => p.id === 'p1')!;
    await new Promise<void>((resolve) => {
      const off = t.mesh.onChange(() => p1.ranges.length > 0 && (off(), resolve()));
    });
    expect(silent.assigns).toBe(1);
    clock.advance(2000);
    expect((await running).ids).toEqual(stories.expected);
    expect(routed(session)).toEqual(['p1']);
    expect(t.mesh.peers.find((p) => p.id === 'p2')!.quarantine?.reason).toMatch(/not ready for layers .*did not answer 'ready'.*within 2000 ms/);
    expect(t.mesh.routeReady()).toBe(true);
  });
});
