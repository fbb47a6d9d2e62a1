/** The one classification of hop failures, the deadline a hop's latency gives, and the quarantine back-off. Pure. */
import { describe, expect, it } from 'vitest';
import { classifyHopFailure, quarantines } from '../../src/core/route/hop-failure.ts';
import { CEILING_POSITIONS, DEADLINE_FLOOR_MS, DEADLINE_SLACK, HopLatency, LATENCY_WINDOW } from '../../src/core/mesh/hop-latency.ts';
import { quarantineMs } from '../../src/core/mesh/quarantine.ts';
import { HopDeadlineError, HopFailedError } from '../../src/core/route/route-errors.ts';
import { LinkAnswerError, LinkClosedError, LinkTimeoutError } from '../../src/core/runtime/peer-link.ts';
import { ERROR_CODES, type ErrorCode } from '../../src/shared/protocol.ts';
import { ProtocolError } from '../../src/shared/protocol-error.ts';

describe('classifyHopFailure', () => {
  it('sorts every failure a hop call can end with', () => {
    const cases: [unknown, string][] = [
      [new ProtocolError('cache_miss', 'evicted'), 'cache_miss'],
      [new LinkClosedError('the peer left'), 'lost'],
      [new ProtocolError('cancelled', 'the peer cancelled it'), 'lost'],
      // An honest peer never says these to a leased hop of a live session.
      [new ProtocolError('not_ready', 'range not loaded'), 'faulty'],
      [new ProtocolError('unknown_session', 'released'), 'faulty'],
      [new HopDeadlineError(1, 'p2', 5000), 'hung'],
      [new LinkTimeoutError('frame request 3', 60_000), 'hung'],
      [new HopFailedError(1, 'p2', 'answered with activations of the wrong shape'), 'faulty'],
      [new LinkAnswerError('request 4 was answered with the frame of request 9'), 'faulty'],
      [new ProtocolError('internal', 'GPU out of memory'), 'faulty'],
      [new ProtocolError('nan_activations', 'NaN at token 0'), 'faulty'],
      [new TypeError('a bug in the head'), 'fatal'],
      [new Error('the head could not encode a frame for hop 0'), 'fatal'],
      ['a string', 'fatal'],
    ];
    for (const [error, kind] of cases) expect([String(error), classifyHopFailure(error).kind]).toEqual([String(error), kind]);
  });

  it('every wire error code a peer can report is classified, and only hung and faulty peers are quarantined', () => {
    for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
      const failure = classifyHopFailure(new ProtocolError(code, 'x'));
      expect(['cache_miss', 'lost', 'faulty']).toContain(failure.kind);
    }
    expect(quarantines({ kind: 'hung', reason: '' })).toBe(true);
    expect(quarantines({ kind: 'faulty', reason: '' })).toBe(true);
    expect(quarantines({ kind: 'mismatch', reason: '' })).toBe(true);
    for (const kind of ['cache_miss', 'lost', 'fatal'] as const) expect(quarantines({ kind, reason: '' })).toBe(false);
  });
});

describe('HopLatency: the adaptive deadline', () => {
  it('before any answer (a range that was not warmed up) the ceiling, --hop-timeout', () => {
    expect(new HopLatency().deadlineMs(1, 5000)).toBe(5000);
  });

  it('DEADLINE_SLACK × the recent p99 per position × positions, within [floor, ceiling]', () => {
    const latency = new HopLatency();
    for (let i = 0; i < 100; i++) latency.record(1, 3); // a fast loopback hop
    expect(latency.deadlineMs(1, 5000)).toBe(DEADLINE_FLOOR_MS);
    latency.record(1, 400); // one slow answer in 101 is not the p99…
    expect(latency.p99MsPerPosition).toBe(3);
    latency.record(1, 400); // …two in 102 are
    expect(latency.p99MsPerPosition).toBe(400);
    expect(latency.deadlineMs(1, 5000)).toBe(DEADLINE_SLACK * 400);
    for (let i = 0; i < 3; i++) latency.record(1, 2000); // the hop is slow now: the ceiling caps it
    expect(latency.deadlineMs(1, 5000)).toBe(5000);
    expect(latency.answered).toBe(105);
  });

  it('forgets answers older than its window', () => {
    const latency = new HopLatency();
    latency.record(1, 900);
    for (let i = 0; i < LATENCY_WINDOW; i++) latency.record(1, 2);
    expect(latency.p99MsPerPosition).toBe(2);
  });

  it('a frame of many positions gets a ceiling proportional to its positions past CEILING_POSITIONS', () => {
    const latency = new HopLatency();
    latency.record(1, 20);
    for (const positions of [CEILING_POSITIONS, 4 * CEILING_POSITIONS, 1000]) latency.record(positions, 20 * positions);
    expect(latency.deadlineMs(CEILING_POSITIONS, 5000)).toBe(DEADLINE_SLACK * 20 * CEILING_POSITIONS);
    expect(latency.deadlineMs(4 * CEILING_POSITIONS, 5000)).toBe(4 * DEADLINE_SLACK * 20 * CEILING_POSITIONS);
    expect(latency.deadlineMs(1000, 5000)).toBe(DEADLINE_SLACK * 20 * 1000); // under its ceiling of 5000 × 1000 / 16
    for (let i = 0; i < 3; i++) latency.record(1, 2000);
    expect(latency.deadlineMs(1000, 5000)).toBe(5000 * (1000 / CEILING_POSITIONS));
  });

  it('a position count not answered yet gets the ceiling (its first run may compile kernels); once answered, the adaptive deadline', () => {
    const latency = new HopLatency();
    for (let i = 0; i < 10; i++) latency.record(1, 50); // decode steps, as after a warm-up
    expect(latency.deadlineMs(1, 5000)).toBe(DEADLINE_FLOOR_MS);
    expect(latency.deadlineMs(3, 5000)).toBe(5000); // a first 3-position speculative verify
    latency.record(3, 2100); // it took 2.1 s (a WebGPU tab compiling for the new shape)
    latency.record(3, 150);
    expect(latency.deadlineMs(3, 5000)).toBe(5000); // the slow first run is in the p99 now: 4 × 700 ms × 3 is past the ceiling
    for (let i = 0; i < LATENCY_WINDOW; i++) latency.record(3, 150);
    expect(latency.deadlineMs(3, 5000)).toBe(Math.max(DEADLINE_FLOOR_MS, DEADLINE_SLACK * 50 * 3));
  });

  it('a ceiling below the floor wins', () => {
    const latency = new HopLatency();
    latency.record(1, 1);
    expect(latency.deadlineMs(1, 300)).toBe(300);
  });
});

describe('quarantineMs', () => {
  it('doubles per fault from the base, bounded by the max', () => {
    const policy = { baseMs: 10_000, maxMs: 300_000 };
    expect([1, 2, 3, 4, 5, 6, 7, 20].map((n) => quarantineMs(n, policy))).toEqual([10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000]);
  });
});
