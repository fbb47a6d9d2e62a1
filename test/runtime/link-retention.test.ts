/**
 * What the head's links keep. A peer's link lives as long as the peer; a Route Session's
 * lease on it must not: a closed lease (and what its session hangs on it — activation
 * history, telemetry) is garbage even while the link stays up. Many calls in flight on the
 * one in-process link of the head's own layers add no listener to a shared signal (Node's
 * MaxListenersExceededWarning at 32 sessions). A stand-in ShardService answers: these are
 * unit tests of the link seam.
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { encodeFrame } from '../../src/core/frames/frame-codec.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { LeasedLink } from '../../src/core/mesh/leased-link.ts';
import { LinkClosedError } from '../../src/core/runtime/peer-link.ts';
import type { FrameReply, ShardService } from '../../src/core/runtime/shard-service.ts';
import type { ControlMessage } from '../../src/shared/control.ts';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** Answers each frame with itself as a result, once `open` lets it (held frames wait). */
class EchoService implements ShardService {
  readonly kvEntries = 0;
  private gate: Promise<void> = Promise.resolve();
  private openGate: () => void = () => {};
  hold(): void {
    this.gate = new Promise((resolve) => (this.openGate = resolve));
  }
  open(): void {
    this.openGate();
  }
  async handleFrame(bytes: Uint8Array): Promise<FrameReply> {
    await this.gate;
    const copy = bytes.slice();
    copy[6] = 3; // kind: result
    return { frame: copy };
  }
  async handleControl(message: ControlMessage): Promise<ControlMessage> {
    return message.kind === 'ping' ? { kind: 'pong', id: message.id, t: message.t } : { kind: 'error', id: message.id, code: 'unknown_kind', message: 'no' };
  }
  async dispose(): Promise<void> {}
}

const frame = () =>
  encodeFrame({ kind: 'decode', requestId: 0, sessionId: '00000000-0000-4000-8000-000000000001', startPosition: 1, range: { start: 0, end: 1 }, activations: { dtype: 'fp32', data: new Float32Array(4), tokens: 1, hiddenSize: 4 } });

/** How many of `refs` still point somewhere after a few collections. */
async function stillReachable(refs: readonly WeakRef<object>[]): Promise<number> {
  for (let i = 0; i < 5 && refs.some((ref) => ref.deref() !== undefined); i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  return refs.filter((ref) => ref.deref() !== undefined).length;
}

/** One session's use of `shared`: a lease carrying a payload, one frame, closed. Returns a weak reference to the payload. */
async function leaseOnce(shared: InProcessLink): Promise<WeakRef<object>> {
  const lease = new LeasedLink(shared);
  const payload = { history: new Float32Array(1024) }; // what a session would hold
  (lease as unknown as { payload: object }).payload = payload;
  await lease.request(frame());
  await lease.close('session closed');
  return new WeakRef(payload);
}

describe('a lease is not kept by the link it leases', () => {
  it('a closed lease, and what hangs on it, is collected while the shared link stays open', async () => {
    const shared = new InProcessLink(new EchoService());
    const refs: WeakRef<object>[] = [];
    for (let i = 0; i < 200; i++) refs.push(await leaseOnce(shared));
    expect(await stillReachable(refs), 'closed leases still reachable').toBe(0);
    expect(await shared.control({ kind: 'ping', t: 1 })).toMatchObject({ kind: 'pong' });
  });

  it('open leases end when the shared link closes; a lease on a closed link is closed from the start', async () => {
    const shared = new InProcessLink(new EchoService());
    const leases = [new LeasedLink(shared), new LeasedLink(shared)];
    await leases[0].close();
    await shared.close('the peer left');
    await Promise.all(leases.map((lease) => lease.closed));
    await expect(leases[1].request(frame())).rejects.toBeInstanceOf(LinkClosedError);
    const late = new LeasedLink(shared);
    await late.closed;
    await expect(late.control({ kind: 'ping', t: 2 })).rejects.toThrow(/the peer link closed/);
  });
});

describe('the in-process link with many calls in flight', () => {
  it('40 concurrent frames: no MaxListenersExceededWarning, all answered; close rejects the ones held', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      const service = new EchoService();
      const shared = new InProcessLink(service);
      service.hold();
      const answered = Promise.all(Array.from({ length: 40 }, () => new LeasedLink(shared).request(frame(), new AbortController().signal)));
      service.open();
      expect(await answered).toHaveLength(40);
      service.hold();
      const held = Array.from({ length: 40 }, () => shared.request(frame()));
      await shared.close('done');
      for (const call of held) await expect(call).rejects.toBeInstanceOf(LinkClosedError);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
    }
  });
});
