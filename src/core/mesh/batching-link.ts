/**
 * BatchingLink: a PeerLink that folds the decode steps of different sessions, bound for the
 * same layer range of one peer, into batched frames (protocol 3), below the Route Session:
 * sessions send and receive their own single frames and never know they were batched.
 *
 * No timer. Per range, one frame is in flight at a time: a decode step that arrives while
 * the range is idle leaves at the end of the current turn (`nextTurn`), with every other
 * step that became ready in that turn — the sessions a batched answer from the previous hop
 * released together stay together, instead of the first going alone and the rest a round
 * trip later. A lone stream's step leaves alone, one turn later than a direct send. Steps
 * that arrive while a frame is in flight wait and leave together, as one batched frame, the
 * moment it returns. Under load, sessions that take turns fall into step with each other.
 *
 * Each entry settles on its own: its own result frame, its own error (a cache miss, a
 * released session) rebuilt as the `ProtocolError` the peer reported, or its own abort (it
 * leaves the queue, or its answer is dropped). A failure of the whole batched request (the
 * link closed, timed out, the peer refused the frame) rejects every entry it carried.
 * Prefill frames and anything else pass straight through.
 *
 * A step's lane is read from its header's layer range; the frame is decoded only when it
 * leaves in a batch (a lone step goes as the caller's bytes, never decoded here), and one
 * that does not decode then goes alone, for the peer to refuse as it would have.
 */
import type { ControlMessage } from '../../shared/control.ts';
import { FRAME_HEADER_BYTES, FRAME_KIND_CODES, FRAME_OFFSETS, frameRequestId, stampFrameRequestId } from '../../shared/frame-layout.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { decodeBatchFrame, encodeBatchFrame, MAX_BATCH_ENTRIES } from '../frames/batch-frame-codec.ts';
import { decodeFrame, encodeFrame, type ActivationFrame } from '../frames/frame-codec.ts';
import { nextTurn } from '../runtime/next-turn.ts';
import type { PeerLink } from '../runtime/peer-link.ts';
import { hopMark } from '../runtime/hop-trace.ts';

interface RangeLane {
  /** A frame is in flight, or a send is scheduled for the end of this turn. */
  busy: boolean;
  readonly queue: Waiting[];
}

/** A decode step from its arrival to its answer; the abort listener on its signal itself (no closures per step). */
class Waiting {
  /** Decoded when the step leaves in a batch. */
  frame?: ActivationFrame;

  constructor(
    /** The caller's bytes (stamped with the request id that answered it, as every link does). */
    readonly bytes: Uint8Array,
    readonly signal: AbortSignal | undefined,
    private readonly lane: RangeLane,
    private readonly onValue: (bytes: Uint8Array) => void,
    private readonly onError: (error: unknown) => void,
  ) {
    signal?.addEventListener('abort', this, { once: true });
  }

  resolve(bytes: Uint8Array): void {
    this.signal?.removeEventListener('abort', this);
    this.onValue(bytes);
  }

  reject(error: unknown): void {
    this.signal?.removeEventListener('abort', this);
    this.onError(error);
  }

  /** Its signal aborted: it leaves the queue (if still there) and rejects with the reason. */
  handleEvent(): void {
    const i = this.lane.queue.indexOf(this);
    if (i >= 0) this.lane.queue.splice(i, 1);
    this.onError(this.signal!.reason);
  }
}

type Decoded = Waiting & { frame: ActivationFrame };

export interface BatchingStats {
  /** Batched frames sent, and the entries they carried. */
  readonly batches: number;
  readonly batchedEntries: number;
  /** Decode frames sent alone. */
  readonly singles: number;
}

export class BatchingLink implements PeerLink {
  private readonly lanes = new Map<number, RangeLane>();
  private counts = { batches: 0, batchedEntries: 0, singles: 0 };

  constructor(
    private readonly inner: PeerLink,
    private readonly maxEntries = MAX_BATCH_ENTRIES,
  ) {}

  get closed(): Promise<void> {
    return this.inner.closed;
  }

  get stats(): BatchingStats {
    return { ...this.counts };
  }

  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    return this.inner.control(message, signal);
  }

  close(reason?: string): Promise<void> {
    return this.inner.close(reason);
  }

  request(bytes: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    if (bytes.byteLength < FRAME_HEADER_BYTES || bytes[FRAME_OFFSETS.kind] !== FRAME_KIND_CODES.decode) return this.inner.request(bytes, signal);
    if (signal?.aborted) return Promise.reject(signal.reason);
    // The lane: the header's layer range (u16 start, u16 end), as one number.
    const key = (bytes[FRAME_OFFSETS.layerStart] | (bytes[FRAME_OFFSETS.layerStart + 1] << 8)) * 0x10000 + (bytes[FRAME_OFFSETS.layerEnd] | (bytes[FRAME_OFFSETS.layerEnd + 1] << 8));
    let lane = this.lanes.get(key);
    if (!lane) this.lanes.set(key, (lane = { busy: false, queue: [] }));
    const current = lane;
    return new Promise<Uint8Array>((resolve, reject) => {
      const waiting = new Waiting(bytes, signal, current, resolve, reject);
      hopMark('head.lane.queued');
      current.queue.push(waiting);
      if (!current.busy) {
        current.busy = true;
        nextTurn(() => void this.drain(current));
      }
    });
  }

  private async drain(lane: RangeLane): Promise<void> {
    lane.busy = true;
    try {
      while (lane.queue.length > 0) {
        const taken = lane.queue.splice(0, this.maxEntries);
        if (taken.length === 1) {
          await this.sendOne(taken[0]);
          continue;
        }
        const decoded = taken.filter((w) => this.decoded(w));
        const alone = taken.filter((w) => w.frame === undefined);
        await Promise.all([decoded.length === 1 ? this.sendOne(decoded[0]) : decoded.length > 1 ? this.sendBatch(decoded as Decoded[]) : undefined, ...alone.map((w) => this.sendOne(w))]);
      }
    } finally {
      lane.busy = false;
    }
  }

  /** Decode `w`'s frame for a batch; false (left undecoded) when it does not decode. */
  private decoded(w: Waiting): boolean {
    try {
      w.frame = decodeFrame(w.bytes);
      return true;
    } catch {
      return false;
    }
  }

  private async sendOne(w: Waiting): Promise<void> {
    this.counts.singles++;
    hopMark('head.lane.sent');
    try {
      w.resolve(await this.inner.request(w.bytes, w.signal));
    } catch (error) {
      w.reject(error);
    }
  }

  private async sendBatch(entries: Decoded[]): Promise<void> {
    const first = entries[0].frame;
    let answer;
    let requestId = 0;
    try {
      const bytes = encodeBatchFrame({
        kind: 'batch',
        requestId: 0,
        range: first.range,
        dtype: first.activations.dtype,
        hiddenSize: first.activations.hiddenSize,
        entries: entries.map((w) => ({ sessionId: w.frame.sessionId, startPosition: w.frame.startPosition, activations: w.frame.activations })),
      });
      // Not aborted by any one entry's signal: the others still want their answers.
      answer = decodeBatchFrame(await this.inner.request(bytes));
      requestId = frameRequestId(bytes) ?? 0;
      if (answer.kind !== 'batch-result' || answer.entries.length !== entries.length) throw new ProtocolError('bad_frame', 'the peer answered a batch with a frame that is not its result');
    } catch (error) {
      for (const w of entries) w.reject(error);
      return;
    }
    this.counts.batches++;
    this.counts.batchedEntries += entries.length;
    entries.forEach((w, i) => {
      const got = answer.entries[i];
      if (w.signal?.aborted) return w.reject(w.signal.reason);
      if (got.sessionId !== w.frame.sessionId || got.startPosition !== w.frame.startPosition) {
        return w.reject(new ProtocolError('bad_frame', 'a batch result entry answers another request', { sessionId: w.frame.sessionId }));
      }
      if (got.error) return w.reject(new ProtocolError(got.error.code, got.error.message, { sessionId: got.sessionId }));
      try {
        stampFrameRequestId(w.bytes, requestId);
        w.resolve(encodeFrame({ kind: 'result', requestId, sessionId: got.sessionId, startPosition: got.startPosition, range: answer.range, activations: got.activations }));
      } catch (error) {
        w.reject(error);
      }
    });
  }
}
