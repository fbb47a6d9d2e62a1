import { spawnSync } from 'node:child_process';
import { getEventListeners } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { withDeadline } from '../../src/core/runtime/deadline.ts';
import { DeadlineSweep, sweepOf } from '../../src/core/runtime/deadline-sweep.ts';
import { SocketLink } from '../../src/core/runtime/socket-link.ts';
import { LinkTimeoutError } from '../../src/core/runtime/peer-link.ts';
import { encodeFrame } from '../../src/core/frames/frame-codec.ts';
import { ManualClock } from '../route/manual-clock.ts';

class Late extends Error {}
const never = (signal: AbortSignal | undefined) =>
  new Promise<string>((_, reject) => (signal!.aborted ? reject(signal!.reason) : signal!.addEventListener('abort', () => reject(signal!.reason), { once: true })));

describe('withDeadline on the clock’s one deadline sweep', () => {
  it('a hung call rejects with its own reason exactly at its deadline; many calls share one timer', async () => {
    const clock = new ManualClock();
    const calls = [100, 100, 250].map((ms) => withDeadline(clock, ms, () => new Late(`no answer within ${ms} ms`), never).catch((e: unknown) => e));
    expect(clock.pending).toBe(1);
    expect(clock.nextIn).toBe(100);
    clock.advance(99);
    await Promise.resolve();
    expect(sweepOf(clock).size).toBe(3);
    clock.advance(1);
    const [a, b] = await Promise.all(calls.slice(0, 2));
    expect(a).toBeInstanceOf(Late);
    expect((b as Error).message).toBe('no answer within 100 ms');
    expect(clock.nextIn).toBe(150); // armed again for the one left
    clock.advance(150);
    expect(((await calls[2]) as Error).message).toBe('no answer within 250 ms');
    expect(clock.pending).toBe(0);
    expect(sweepOf(clock).size).toBe(0);
  });

  it('a settled call leaves nothing behind: its deadline is gone and the sweep stops once its timer finds nothing', async () => {
    const clock = new ManualClock();
    let seen: AbortSignal | undefined;
    expect(await withDeadline(clock, 100, () => new Late(), async (s) => ((seen = s), 'answer'))).toBe('answer');
    expect(sweepOf(clock).size).toBe(0);
    expect(clock.pending).toBe(1); // the sweep's timer, holding no deadline
    clock.advance(100);
    expect(seen!.aborted).toBe(false); // it never expired
    expect(clock.pending).toBe(0);
    expect(sweepOf(clock).armed).toBe(false);
  });

  it('the caller’s abort reaches the work with the caller’s reason, once, and removes the deadline', async () => {
    const clock = new ManualClock();
    const caller = new AbortController();
    let aborts = 0;
    const call = withDeadline(clock, 1000, () => new Late(), (s) => (s!.addEventListener('abort', () => aborts++), never(s)), caller.signal).catch((e: unknown) => e);
    caller.abort(new Error('cancelled'));
    expect(((await call) as Error).message).toBe('cancelled');
    expect(sweepOf(clock).size).toBe(0);
    clock.advance(1000);
    expect(aborts).toBe(1);
  });

  it('calls under one caller signal share one abort listener; its abort reaches each call once, in the order they started', async () => {
    const clock = new ManualClock();
    const caller = new AbortController();
    const order: number[] = [];
    const started = (i: number) => (s: AbortSignal | undefined) => (s!.addEventListener('abort', () => order.push(i)), never(s));
    expect(await withDeadline(clock, 1000, () => new Late(), async () => 'settled', caller.signal)).toBe('settled');
    const calls = [0, 1, 2].map((i) => withDeadline(clock, 1000, () => new Late(), started(i), caller.signal).catch((e: unknown) => e));
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(1);
    caller.abort(new Error('cancelled'));
    for (const error of await Promise.all(calls)) expect((error as Error).message).toBe('cancelled');
    expect(order).toEqual([0, 1, 2]);
    expect(sweepOf(clock).size).toBe(0);
    const after = await withDeadline(clock, 1000, () => new Late(), never, caller.signal).catch((e: unknown) => e);
    expect((after as Error).message).toBe('cancelled');
  });

  it('with lag grace, a sweep that runs late gives the call one more millisecond, once', async () => {
    const clock = new ManualClock();
    let answer!: (v: string) => void;
    const call = withDeadline(clock, 100, () => new Late('late'), (s) => new Promise<string>((resolve, reject) => ((answer = resolve), s!.addEventListener('abort', () => reject(s!.reason)))), undefined, 50);
    clock.advance(500); // the loop stalled: 400 ms late
    expect(clock.nextIn).toBe(1);
    answer('arrived during the stall');
    expect(await call).toBe('arrived during the stall');
    const late = withDeadline(clock, 100, () => new Late('late'), never, undefined, 50).catch((e: unknown) => e);
    clock.advance(500);
    clock.advance(1);
    expect(await late).toBeInstanceOf(Late);
  });
});

describe('DeadlineSweep past the host’s timer range', () => {
  it('a deadline farther out than 2^31 − 1 ms arms a timer of at most that, and expires only at its own time', () => {
    const clock = new ManualClock();
    const sweep = new DeadlineSweep(clock);
    const max = 0x7fffffff;
    let expired = 0;
    sweep.add({ due: clock.now() + 3 * max, graceMs: 0, expire: () => void expired++ });
    expect(clock.nextIn).toBe(max);
    clock.advance(max);
    expect(expired).toBe(0);
    expect(clock.nextIn).toBe(max); // armed again for the rest, not at once
    clock.advance(max);
    expect(clock.nextIn).toBe(max);
    clock.advance(max);
    expect(expired).toBe(1);
    expect(clock.pending).toBe(0);
  });
});

describe('SocketLink request timeouts on one sweep per link', () => {
  const frame = () => encodeFrame({ kind: 'decode', requestId: 0, sessionId: '00000000-0000-4000-8000-000000000001', startPosition: 3, range: { start: 0, end: 2 }, activations: { dtype: 'fp32', data: new Float32Array(4), tokens: 1, hiddenSize: 4 } });
  it('a peer that never answers: each request rejects with LinkTimeoutError; an answered one and an aborted one do not time out', async () => {
    const sent: Uint8Array[] = [];
    const link = new SocketLink({ send: (d) => void (typeof d !== 'string' && sent.push(d)), close() {} }, { timeoutMs: 30 });
    const started = performance.now();
    const hung = [link.request(frame()), link.request(frame())].map((p) => p.catch((e: unknown) => e));
    const answered = link.request(frame());
    const caller = new AbortController();
    const aborted = link.request(frame(), caller.signal).catch((e: unknown) => e);
    caller.abort(new Error('cancelled'));
    expect(((await aborted) as Error).message).toBe('cancelled');
    const answer = encodeFrame({ kind: 'result', requestId: 0, sessionId: '00000000-0000-4000-8000-000000000001', startPosition: 3, range: { start: 0, end: 2 }, activations: { dtype: 'fp32', data: new Float32Array(4), tokens: 1, hiddenSize: 4 } });
    answer.set(sent[2]!.subarray(8, 12), 8); // the third request's id
    link.receive(answer);
    expect(await answered).toBe(answer);
    for (const error of await Promise.all(hung)) expect(error).toBeInstanceOf(LinkTimeoutError);
    expect(performance.now() - started).toBeGreaterThanOrEqual(29);
    await link.close();
  });

  it('an open link keeps no timer holding the process once its requests are answered (the sweep’s idle timer is unref’d)', () => {
    // A child with a 60 s timeout, one request answered, the link left open: it must end on its own, long before 60 s.
    const module = fileURLToPath(new URL('../../src/core/runtime/socket-link.ts', import.meta.url));
    const codec = fileURLToPath(new URL('../../src/core/frames/frame-codec.ts', import.meta.url));
    const script = `
      const { SocketLink } = await import(${JSON.stringify(module)});
      const { encodeFrame } = await import(${JSON.stringify(codec)});
      const f = (kind) => encodeFrame({ kind, requestId: 0, sessionId: '00000000-0000-4000-8000-000000000001', startPosition: 3, range: { start: 0, end: 2 }, activations: { dtype: 'fp32', data: new Float32Array(4), tokens: 1, hiddenSize: 4 } });
      const sent = [];
      const link = new SocketLink({ send: (d) => void sent.push(d), close() {} }, { timeoutMs: 60000 });
      const answered = link.request(f('decode'));
      const answer = f('result');
      answer.set(sent[0].subarray(8, 12), 8);
      link.receive(answer);
      await answered;
      process.stdout.write('answered');
    `;
    const started = performance.now();
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(child.stderr).toBe('');
    expect(child.stdout).toBe('answered');
    expect(child.signal).toBeNull(); // not killed by the 20 s timeout
    expect(child.status).toBe(0);
    expect(performance.now() - started).toBeLessThan(20_000);
  });
});
