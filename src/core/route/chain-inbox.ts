/**
 * ChainInbox: what the head hears of chained steps while they run — each hop's copy (kind 7)
 * and each chain error a hop reports — kept by step (request id) and hop until the step's
 * loop takes them, in hop order. A hop's report fails the wait for its own copy and for every
 * later hop's (a hop that could not forward sends its copy, then its report). A copy is filed under the hop whose peer sent it and whose
 * range it carries; anything for another step, range or session is ignored (a late copy of a
 * step that was repaired, another session's). A copy-lanes frame (kind 9, protocol 3.4) is
 * split into the copies its lanes stand for (decoded once for every session's inbox); one that
 * does not decode fails the wait of each step whose lane its table names, as an unusable copy
 * of that hop would. The inbox stops listening when closed.
 */
import type { ErrorMessage } from '../../shared/control.ts';
import { errorFromControlMessage } from '../../shared/control-errors.ts';
import { FRAME_HEADER_BYTES, FRAME_OFFSETS, frameRequestId } from '../../shared/frame-layout.ts';
import { decodeLaneFrame, laneFrameKind, peekLanes, splitLaneFrame } from '../frames/lane-frame-codec.ts';
import { readSessionId } from '../frames/session-id.ts';
import type { Clock } from '../runtime/clock.ts';
import type { Hop } from './hop.ts';
import { HopDeadlineError } from './route-errors.ts';

/** A hop refused or failed a chained frame (its report): the step goes on through the head from there. */
export class ChainReportError extends Error {
  override readonly name = 'ChainReportError';
  constructor(
    readonly hop: number,
    readonly report: ErrorMessage,
  ) {
    super(`hop ${hop} reported on a chained frame: ${errorFromControlMessage(report).message}`);
  }
}

const key = (requestId: number, hop: number) => `${requestId}:${hop}`;

function sameSession(bytes: Uint8Array, sessionId: string): boolean {
  try {
    return readSessionId(bytes, FRAME_OFFSETS.sessionId) === sessionId;
  } catch {
    return false;
  }
}

/** A copy-lanes frame's copies (or why it cannot be read), once per frame however many inboxes hear it. */
const split = new WeakMap<Uint8Array, readonly Uint8Array[] | Error>();
function copiesIn(bytes: Uint8Array): readonly Uint8Array[] | Error {
  if (laneFrameKind(bytes) !== 'copy-lanes') return [bytes];
  let out = split.get(bytes);
  if (!out) {
    try {
      out = splitLaneFrame(decodeLaneFrame(bytes)).map((l) => l.bytes);
    } catch (error) {
      out = error instanceof Error ? error : new Error(String(error));
    }
    split.set(bytes, out);
  }
  return out;
}

export class ChainInbox {
  private readonly copies = new Map<string, Uint8Array | Error>();
  private readonly reports = new Map<string, ErrorMessage>();
  private readonly unlisten: (() => void)[] = [];
  private wake: (() => void) | undefined;

  /** Listens to the ports of `hops[first..last]` for the steps of `requestIds`. */
  constructor(
    hops: readonly Hop[],
    private readonly first: number,
    last: number,
    private readonly requestIds: ReadonlySet<number>,
    private readonly sessionId: string,
    private readonly clock: Clock,
  ) {
    for (let i = first; i <= last; i++) {
      const hop = hops[i];
      const port = hop.lease.chain?.port;
      if (!port) continue;
      const ours = (bytes: Uint8Array) => {
        if (bytes.byteLength < FRAME_HEADER_BYTES) return false;
        const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        return view.getUint16(FRAME_OFFSETS.layerStart, true) === hop.range.start && view.getUint16(FRAME_OFFSETS.layerEnd, true) === hop.range.end;
      };
      const file = (requestId: number, copy: Uint8Array | Error) => {
        const k = key(requestId, i);
        if (!this.copies.has(k)) this.copies.set(k, copy);
        this.wake?.();
      };
      this.unlisten.push(
        port.listen({
          copy: (frame) => {
            if (!ours(frame)) return;
            const copies = copiesIn(frame);
            if (copies instanceof Error) {
              for (const lane of peekLanes(frame)) if (lane.sessionId === this.sessionId && this.requestIds.has(lane.requestId)) file(lane.requestId, copies);
              return;
            }
            for (const bytes of copies) {
              const requestId = frameRequestId(bytes);
              // Request ids are each session's own: another session's copy on this peer's link is not ours.
              if (requestId !== undefined && this.requestIds.has(requestId) && sameSession(bytes, this.sessionId)) file(requestId, bytes);
            }
          },
          report: (error) => {
            if (error.requestId === undefined || !this.requestIds.has(error.requestId) || error.sessionId !== this.sessionId) return;
            const k = key(error.requestId, i);
            if (!this.reports.has(k)) this.reports.set(k, error);
            this.wake?.();
          },
        }),
      );
    }
  }

  /**
   * The copy hop `index` sent for step `requestId`, once it is there; rejects with a
   * ChainReportError when that hop reported on the step first, a HopDeadlineError when
   * nothing came within `deadlineMs` (undefined: no deadline), or the signal's reason.
   */
  async take(requestId: number, hop: Hop, deadlineMs: number | undefined, signal: AbortSignal): Promise<Uint8Array> {
    const k = key(requestId, hop.index);
    const until = deadlineMs === undefined ? undefined : this.clock.now() + deadlineMs;
    for (;;) {
      const copy = this.copies.get(k);
      if (copy instanceof Error) throw copy;
      if (copy) return copy;
      // A report from this hop, or from one before it whose copy came (it could not forward): this copy will not come.
      const report = this.reportUpTo(requestId, hop.index);
      if (report) throw new ChainReportError(hop.index, report);
      signal.throwIfAborted();
      const left = until === undefined ? undefined : until - this.clock.now();
      if (left !== undefined && left <= 0) throw new HopDeadlineError(hop.index, hop.peerId, deadlineMs!);
      await new Promise<void>((resolve) => {
        let cancel = () => {};
        const done = () => {
          cancel();
          signal.removeEventListener('abort', done);
          if (this.wake === done) this.wake = undefined;
          resolve();
        };
        if (left !== undefined) cancel = this.clock.setTimeout(done, left);
        this.wake = done;
        signal.addEventListener('abort', done, { once: true });
      });
    }
  }

  private reportUpTo(requestId: number, hop: number): ErrorMessage | undefined {
    for (let i = this.first; i <= hop; i++) {
      const report = this.reports.get(key(requestId, i));
      if (report) return report;
    }
    return undefined;
  }

  close(): void {
    for (const stop of this.unlisten.splice(0)) stop();
    this.wake?.();
    this.copies.clear();
    this.reports.clear();
  }
}
