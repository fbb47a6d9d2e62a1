/**
 * A PeerLink decorator for the bench, on the head side: counts activation frames and their
 * bytes (sent and received), times each request, and optionally injects link delay.
 *
 * `delayMs` is an added ROUND-TRIP time per frame: half is waited before the frame is sent,
 * half after the answer arrives, so a hop's request takes `delayMs` longer, as on a link
 * whose RTT is `delayMs` more than loopback. Control messages are not delayed.
 */
import type { ControlMessage } from '../src/shared/control.ts';
import type { PeerLink } from '../src/core/runtime/peer-link.ts';

export interface LinkMeter {
  frames: number;
  sentBytes: number;
  receivedBytes: number;
  totalMs: number;
  /** Frames carrying exactly one position (decode steps), and their bytes each way. */
  decodeFrames: number;
  decodeSentBytes: number;
  decodeReceivedBytes: number;
  decodeMs: number;
}

export const newMeter = (): LinkMeter => ({ frames: 0, sentBytes: 0, receivedBytes: 0, totalMs: 0, decodeFrames: 0, decodeSentBytes: 0, decodeReceivedBytes: 0, decodeMs: 0 });

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (ms <= 0) return resolve();
    const timer = setTimeout(() => (signal?.removeEventListener('abort', onAbort), resolve()), ms);
    const onAbort = () => (clearTimeout(timer), reject(signal!.reason));
    signal?.addEventListener('abort', onAbort, { once: true });
  });

export class MeteredLink implements PeerLink {
  constructor(
    private readonly inner: PeerLink,
    readonly meter: LinkMeter,
    private readonly delayMs = 0,
    /** Bytes of one position's activations: tells decode frames from prefill frames. */
    private readonly decodeFrameBytes?: number,
  ) {}

  get closed(): Promise<void> {
    return this.inner.closed;
  }

  async request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    const started = performance.now();
    await sleep(this.delayMs / 2, signal);
    const answer = await this.inner.request(frame, signal);
    await sleep(this.delayMs / 2, signal);
    const m = this.meter;
    m.frames++;
    const ms = performance.now() - started;
    m.totalMs += ms;
    m.sentBytes += frame.byteLength;
    m.receivedBytes += answer.byteLength;
    if (this.decodeFrameBytes !== undefined && frame.byteLength <= this.decodeFrameBytes) {
      m.decodeFrames++;
      m.decodeSentBytes += frame.byteLength;
      m.decodeReceivedBytes += answer.byteLength;
      m.decodeMs += ms;
    }
    return answer;
  }

  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    return this.inner.control(message, signal);
  }


  close(reason?: string): Promise<void> {
    return this.inner.close(reason);
  }
}
