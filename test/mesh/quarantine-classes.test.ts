import { describe, expect, it } from 'vitest';
import { DEFAULT_QUARANTINE, type FaultClass, QuarantineBook, quarantineMs } from '../../src/core/mesh/quarantine.ts';
import { ManualClock } from '../route/manual-clock.ts';

/** Fault `peer` with `fault`, wait out the quarantine, and return how long it lasted. */
function strike(book: QuarantineBook, clock: ManualClock, fault: FaultClass, peer = 'p1'): number {
  const entry = book.add(peer, fault, fault);
  const ms = entry.until - entry.since;
  clock.advance(ms);
  expect(book.get(peer)).toBeUndefined();
  return ms;
}

describe('quarantine back-off by fault class', () => {
  it('hangs double from 10 s and stop at 30 s however many there are (54 SIGSTOPs in 10 min)', () => {
    const clock = new ManualClock();
    const book = new QuarantineBook(clock, DEFAULT_QUARANTINE, () => {});
    const times: number[] = [];
    for (let i = 0; i < 54; i++) {
      times.push(strike(book, clock, 'hang'));
      clock.advance(1000); // it hangs again a second after it is back
    }
    expect(times.slice(0, 4)).toEqual([10_000, 20_000, 30_000, 30_000]);
    expect(Math.max(...times)).toBe(30_000);
  });

  it('wrong answers still double to 5 min', () => {
    const clock = new ManualClock();
    const book = new QuarantineBook(clock, DEFAULT_QUARANTINE, () => {});
    const times = Array.from({ length: 7 }, () => strike(book, clock, 'wrong'));
    expect(times).toEqual([10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000]);
  });

  it('hang strikes are forgotten after 30 s clean, wrong-answer strikes only after 5 min', () => {
    const clock = new ManualClock();
    const book = new QuarantineBook(clock, DEFAULT_QUARANTINE, () => {});
    strike(book, clock, 'hang');
    strike(book, clock, 'hang');
    clock.advance(30_000);
    expect(strike(book, clock, 'hang')).toBe(10_000);
    strike(book, clock, 'wrong');
    clock.advance(30_000);
    expect(strike(book, clock, 'wrong')).toBe(20_000);
    clock.advance(299_000);
    expect(strike(book, clock, 'wrong')).toBe(40_000);
    clock.advance(300_000);
    expect(strike(book, clock, 'wrong')).toBe(10_000);
  });

  it('the classes count apart, per peer', () => {
    const clock = new ManualClock();
    const book = new QuarantineBook(clock, DEFAULT_QUARANTINE, () => {});
    for (let i = 0; i < 3; i++) strike(book, clock, 'wrong');
    expect(strike(book, clock, 'hang')).toBe(10_000);
    expect(strike(book, clock, 'wrong')).toBe(80_000);
    expect(strike(book, clock, 'hang', 'p2')).toBe(10_000); // per peer id
  });

  it('a fault while quarantined is counted once, whatever its class', () => {
    const clock = new ManualClock();
    const book = new QuarantineBook(clock, DEFAULT_QUARANTINE, () => {});
    const first = book.add('p1', 'hung', 'hang');
    expect(book.add('p1', 'faulty', 'wrong')).toBe(first);
    clock.advance(first.until - first.since);
    expect(strike(book, clock, 'wrong')).toBe(10_000);
  });

  it('the hang cap follows a shorter policy and never drops below baseMs', () => {
    expect(quarantineMs(5, { baseMs: 100, maxMs: 1000 }, 'hang')).toBe(1000);
    expect(quarantineMs(5, { baseMs: 100, maxMs: 1000, hangMaxMs: 300 }, 'hang')).toBe(300);
    expect(quarantineMs(5, { baseMs: 100, maxMs: 1000, hangMaxMs: 10 }, 'hang')).toBe(100);
    expect(quarantineMs(5, { baseMs: 100, maxMs: 1000 }, 'wrong')).toBe(1000);
  });
});
