/**
 * Test doubles around real parts, for Route Session tests: a peer that misbehaves after a
 * number of good frames (behind a real InProcessLink, so the link's own checks run), a peer
 * that holds frames at a gate, and links that count frames or hold `release` messages.
 */
import { decodeFrame, encodeFrame } from '../../src/core/frames/frame-codec.ts';
import type { FrameReply, ShardPeer, ShardService } from '../../src/core/peer/shard-peer.ts';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';
import type { ControlMessage } from '../../src/shared/control.ts';
import { frameRequestId } from '../../src/shared/frame-layout.ts';

/** `echo`: a well-formed, finite, wrong answer — the frame's own input sent back as its result. */
export type PeerFault = 'nan' | 'shape' | 'foreign-request' | 'garbage' | 'internal' | 'silent' | 'echo' | 'random';

export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Wraps a ShardPeer; from frame `after + 1` on, answers with `fault` instead. */
export class FaultyPeer implements ShardService {
  frames = 0;
  faulted = 0;
  /** Resolves when the first faulty answer is on its way (for 'silent': when the frame arrived). */
  readonly tripped = deferred();
  /** Called with each frame's bytes before it is handled. */
  onFrame?: (bytes: Uint8Array) => void;

  constructor(
    readonly inner: ShardPeer,
    private readonly fault: PeerFault,
    private after: number,
  ) {}

  /** Answer correctly from now on. */
  heal(): void {
    this.after = Infinity;
  }

  get kvEntries(): number {
    return this.inner.kvEntries;
  }

  async handleFrame(bytes: Uint8Array): Promise<FrameReply> {
    this.onFrame?.(bytes);
    if (++this.frames <= this.after) return this.inner.handleFrame(bytes);
    this.faulted++;
    this.tripped.resolve();
    const requestId = frameRequestId(bytes)!;
    switch (this.fault) {
      case 'silent':
        return new Promise<never>(() => {}); // never answers
      case 'internal':
        return { error: { kind: 'error', code: 'internal', message: 'GPU out of memory', requestId } };
      case 'garbage':
        return { frame: Uint8Array.from({ length: 200 }, (_, i) => (i * 37 + 11) & 0xff) };
      case 'echo':
        return { frame: encodeFrame({ ...decodeFrame(bytes), kind: 'result' }) };
    }
    const reply = await this.inner.handleFrame(bytes);
    if (!('frame' in reply)) return reply;
    const answer = decodeFrame(reply.frame);
    const a = answer.activations;
    switch (this.fault) {
      case 'nan': {
        const data = Float32Array.from(a.data as Float32Array);
        data[3] = Number.NaN;
        return { frame: encodeFrame({ ...answer, activations: { ...a, data } }) };
      }
      case 'random': {
        // Well-formed and finite: the honest answer's magnitude, random values (seeded by the frame count).
        const honest = a.data as Float32Array;
        const scale = honest.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
        let x = (this.frames * 2654435761) >>> 0;
        const data = honest.map(() => ((x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32 - 0.5) * 2 * scale);
        return { frame: encodeFrame({ ...answer, activations: { ...a, data } }) };
      }
      case 'shape': {
        const data = new Float32Array(a.data.length + a.hiddenSize);
        data.set(a.data as Float32Array);
        return { frame: encodeFrame({ ...answer, activations: { ...a, data, tokens: a.tokens + 1 } }) };
      }
      case 'foreign-request':
        return { frame: encodeFrame({ ...answer, requestId: (requestId + 1000) >>> 0 }) };
    }
  }

  handleControl(message: ControlMessage): Promise<ControlMessage> {
    return this.inner.handleControl(message);
  }

  dispose(): Promise<void> {
    return this.inner.dispose();
  }
}

/** A peer that said hello but never answers `assign` (until the caller gives up). */
export class SilentAssignLink implements PeerLink {
  assigns = 0;
  constructor(readonly inner: PeerLink) {}
  get closed(): Promise<void> {
    return this.inner.closed;
  }
  request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    return this.inner.request(frame, signal);
  }
  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    if (message.kind !== 'assign') return this.inner.control(message, signal);
    this.assigns++;
    return untilAbort(new Promise<void>(() => {}), signal).then(() => message);
  }
  close(reason?: string): Promise<void> {
    return this.inner.close(reason);
  }
}

/** Counts the frames sent through it (and when): "no frame after the abort". */
export class CountingLink implements PeerLink {
  frames = 0;
  constructor(readonly inner: PeerLink) {}
  get closed(): Promise<void> {
    return this.inner.closed;
  }
  request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    this.frames++;
    return this.inner.request(frame, signal);
  }
  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    return this.inner.control(message, signal);
  }
  close(reason?: string): Promise<void> {
    return this.inner.close(reason);
  }
}

/**
 * Holds frames (after `open` pass) at a gate until `release()`, or until the caller's signal
 * aborts; holds `release` control messages while `holdReleases` is set.
 */
export class GateLink implements PeerLink {
  frames = 0;
  holdReleases = false;
  private gate = deferred();
  private releaseGate = deferred();
  /** Resolves when a frame is held at the gate. */
  held = deferred();
  /** Resolves when a `release` is held. */
  releaseHeld = deferred();

  constructor(
    readonly inner: PeerLink,
    public open = Infinity,
  ) {}

  get closed(): Promise<void> {
    return this.inner.closed;
  }

  release(): void {
    this.open = Infinity;
    this.gate.resolve();
  }

  /** Hold frames again after `open` more pass. */
  hold(open: number): void {
    this.frames = 0;
    this.open = open;
    this.gate = deferred();
    this.held = deferred();
  }

  letReleasesThrough(): void {
    this.holdReleases = false;
    this.releaseGate.resolve();
  }

  async request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    if (this.frames++ >= this.open) {
      this.held.resolve();
      await untilAbort(this.gate.promise, signal);
    }
    return this.inner.request(frame, signal);
  }

  async control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    if (message.kind === 'release' && this.holdReleases) {
      this.releaseHeld.resolve();
      await untilAbort(this.releaseGate.promise, signal);
    }
    return this.inner.control(message, signal);
  }

  close(reason?: string): Promise<void> {
    return this.inner.close(reason);
  }
}

function untilAbort(promise: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    void promise.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
