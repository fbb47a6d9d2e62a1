/**
 * ChainForwarder: a peer's part in chained routes (protocol 3.2). It wraps the peer's
 * ShardService: star frames and control messages pass through, and `chain` messages (from the
 * head's link only) name, per session and range, who may send chain frames and where the
 * output goes next (ChainTable); naming a next hop dials it then, through the HopDialer, at
 * the address the head gave — never at one a frame could carry.
 *
 * A chain frame (`receiveChain`, with the sender its link authenticated) is admitted only from
 * the sender the head named, run as a prefill/decode on the shard, then forwarded as a chain
 * frame for the next range (the critical path) and copied to the head (kind 7, off it). A
 * refusal or failure is reported to the head (`error`, id `chain`, with session and request id)
 * and nothing is forwarded. Every frame of one session on one range — chained or star — runs
 * in arrival order, one at a time, so pipelined chunks and a head's repair frame never
 * interleave on the KV; different sessions' steps may run as one batch (`run`).
 *
 * Lanes (protocol 3.4): a `chain-lanes` frame (kind 8) is split into the chain frames its lanes
 * stand for, each admitted, run and reported on its own (a lane for a session the sender was
 * not named for is refused; the others run); one that does not decode is refused as a whole.
 * For a session the head named with `lanes`, outputs go through a LaneOutbox: those made in one
 * turn (one batched run's) leave as one frame per link.
 */
import { errorToControlMessage } from '../../shared/control-errors.ts';
import type { ControlMessage } from '../../shared/control.ts';
import { FRAME_HEADER_BYTES, FRAME_KIND_CODES, FRAME_MAGIC, FRAME_OFFSETS } from '../../shared/frame-layout.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { isBatchFrame } from '../frames/batch-frame-codec.ts';
import { decodeFrame } from '../frames/frame-codec.ts';
import { decodeLaneFrame, laneFrameKind, peekLanes, splitLaneFrame, type Lane } from '../frames/lane-frame-codec.ts';
import { readSessionId } from '../frames/session-id.ts';
import { CHAIN_REPORT_ID, type ChainListener, type HopDialer, type HopOutlet } from '../runtime/chain-port.ts';
import type { FrameReply, ShardService } from '../runtime/shard-service.ts';
import { chainKey, ChainTable, HEAD_SENDER } from './chain-table.ts';
import { LaneOutbox } from './lane-outbox.ts';
import { peekRequestId, toWireError } from './wire-errors.ts';

export interface ChainForwarderOptions {
  readonly peer: ShardService;
  /** This peer's id (what it names itself when it dials the next hop). */
  readonly peerId: string;
  readonly dialer: HopDialer;
  /** Where copies and reports go: the head's link. */
  readonly head: ChainListener;
  /**
   * How a chain frame runs on the shard (default `peer.handleFrame`, one at a time per
   * session); core/mesh/batched-chain-runs.ts folds concurrent sessions' steps into batches.
   */
  readonly run?: (bytes: Uint8Array) => Promise<FrameReply>;
}

export class ChainForwarder implements ShardService {
  readonly table = new ChainTable();
  private readonly outlets = new Map<string, HopOutlet>();
  /** The last queued frame of each session and range: the next one waits for it. */
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly outbox = new LaneOutbox({
    forward: (peerId, frame, lanes) => this.forward(peerId, frame, lanes),
    copy: (frame) => this.options.head.copy(frame),
  });

  constructor(private readonly options: ChainForwarderOptions) {}

  get kvEntries(): number {
    return this.options.peer.kvEntries;
  }

  get peerId(): string {
    return this.options.peerId;
  }

  /** A star frame from the head: run in order with the chain frames of its session and range. */
  handleFrame(bytes: Uint8Array): Promise<FrameReply> {
    const key = isBatchFrame(bytes) ? undefined : peekKey(bytes);
    if (key === undefined || (!this.queues.has(key) && !this.table.has(key))) return this.options.peer.handleFrame(bytes);
    return this.enqueue(key, () => this.options.peer.handleFrame(bytes));
  }

  async handleControl(message: ControlMessage): Promise<ControlMessage> {
    if (message.kind === 'release') this.table.release(message.sessionId);
    if (message.kind !== 'chain') return this.options.peer.handleControl(message);
    const { id, sessionId, range, from, to, lanes } = message;
    try {
      if (from === this.options.peerId) throw new ProtocolError('protocol_error', `a chain cannot name peer ${from} as its own sender`, { sessionId });
      if (to) {
        if (to.peerId === this.options.peerId || to.peerId === HEAD_SENDER) throw new ProtocolError('protocol_error', `a chain cannot forward to ${to.peerId}`, { sessionId });
        if (!this.outlets.has(to.peerId) || this.outlets.get(to.peerId)!.closed) {
          const outlet = await this.options.dialer.outlet(to).catch((error: unknown) => {
            throw new ProtocolError('route_unavailable', `cannot reach ${to.peerId}: ${error instanceof Error ? error.message : String(error)}`, { sessionId });
          });
          this.outlets.set(to.peerId, outlet);
        }
      }
      this.table.set(sessionId, range, { from, ...(to && { to }), ...(lanes === true && { lanes }) });
      return { kind: 'chained', ...(id !== undefined && { id }), sessionId, range };
    } catch (error) {
      return errorToControlMessage(error, { ...(id !== undefined && { id }), sessionId });
    }
  }

  /** A chain frame from `sender` (`head`, or the peer id its link authenticated). Never throws. */
  receiveChain(bytes: Uint8Array, sender: string): Promise<void> {
    if (laneFrameKind(bytes) === 'chain-lanes') return this.receiveLanes(bytes, sender);
    let frame;
    let entry;
    try {
      frame = decodeFrame(bytes);
      if (frame.kind !== 'chain') throw new ProtocolError('bad_frame', `a chained link carries chain frames, not ${frame.kind}`, { sessionId: frame.sessionId, requestId: frame.requestId });
      entry = this.table.admit(frame.sessionId, frame.range, sender, frame.requestId);
    } catch (error) {
      this.report(error, { requestId: frame?.requestId ?? peekRequestId(bytes), sessionId: frame?.sessionId });
      return Promise.resolve();
    }
    const { sessionId, requestId, startPosition } = frame;
    const to = entry.to;
    return this.enqueue(keyOf(sessionId, frame.range), async () => {
      bytes[FRAME_OFFSETS.kind] = startPosition === 0 ? FRAME_KIND_CODES.prefill : FRAME_KIND_CODES.decode;
      const reply = await (this.options.run ?? ((b: Uint8Array) => this.options.peer.handleFrame(b)))(bytes);
      if ('error' in reply) return this.options.head.report({ ...reply.error, id: CHAIN_REPORT_ID, sessionId, requestId });
      const out = reply.frame;
      if (entry.lanes) {
        const lane: Lane = { sessionId, requestId, startPosition, activations: decodeFrame(out).activations };
        return this.outbox.push({ range: frame.range, ...(to && { to }), lane });
      }
      if (to) {
        const next = out.slice();
        next[FRAME_OFFSETS.kind] = FRAME_KIND_CODES.chain;
        const view = new DataView(next.buffer, next.byteOffset, next.byteLength);
        view.setUint16(FRAME_OFFSETS.layerStart, to.range.start, true);
        view.setUint16(FRAME_OFFSETS.layerEnd, to.range.end, true);
        try {
          this.outletTo(to.peerId).send(next);
        } catch (error) {
          this.report(new ProtocolError('route_unavailable', `could not forward to ${to.peerId}: ${error instanceof Error ? error.message : String(error)}`), { sessionId, requestId });
        }
      }
      out[FRAME_OFFSETS.kind] = FRAME_KIND_CODES.copy;
      this.options.head.copy(out);
    });
  }

  /** A chain-lanes frame: each lane goes the way a lone chain frame would. Never throws. */
  private async receiveLanes(bytes: Uint8Array, sender: string): Promise<void> {
    let lanes;
    try {
      lanes = splitLaneFrame(decodeLaneFrame(bytes));
    } catch (error) {
      // Refused as a whole; a lane the sender was named for is told so (no one else's).
      const range = peekRange(bytes);
      const named = range ? peekLanes(bytes).filter((l, i, all) => this.table.get(l.sessionId, range)?.from === sender && all.findIndex((o) => o.sessionId === l.sessionId) === i) : [];
      if (named.length === 0) this.report(error, {});
      for (const lane of named) this.report(error, lane);
      return;
    }
    await Promise.all(lanes.map((l) => this.receiveChain(l.bytes, sender)));
  }

  private forward(peerId: string, frame: Uint8Array, lanes: readonly Lane[]): void {
    try {
      this.outletTo(peerId).send(frame);
    } catch (error) {
      const problem = new ProtocolError('route_unavailable', `could not forward to ${peerId}: ${error instanceof Error ? error.message : String(error)}`);
      for (const { sessionId, requestId } of lanes) this.report(problem, { sessionId, requestId });
    }
  }

  dispose(): Promise<void> {
    return this.options.peer.dispose();
  }

  private outletTo(peerId: string): HopOutlet {
    const outlet = this.outlets.get(peerId);
    if (!outlet) throw new ProtocolError('route_unavailable', `no link to ${peerId}`);
    return outlet;
  }

  private report(error: unknown, context: { sessionId?: string; requestId?: number }): void {
    this.options.head.report({ ...errorToControlMessage(toWireError(error), context), id: CHAIN_REPORT_ID });
  }

  private enqueue<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(key) ?? Promise.resolve();
    const run = previous.then(work, work);
    const tail = run.catch(() => undefined);
    this.queues.set(key, tail);
    void tail.then(() => {
      if (this.queues.get(key) === tail) this.queues.delete(key);
    });
    return run;
  }
}

const keyOf = chainKey;

/** The layer range in a frame's header, or undefined when it has no header. */
function peekRange(bytes: Uint8Array): { start: number; end: number } | undefined {
  if (bytes.byteLength < FRAME_HEADER_BYTES) return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return { start: view.getUint16(FRAME_OFFSETS.layerStart, true), end: view.getUint16(FRAME_OFFSETS.layerEnd, true) };
}

/** The session and range key of a single frame's header (read, not decoded), or undefined when it is no frame. */
function peekKey(bytes: Uint8Array): string | undefined {
  if (bytes.byteLength < FRAME_HEADER_BYTES || FRAME_MAGIC.some((b, i) => bytes[i] !== b)) return undefined;
  try {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const range = { start: view.getUint16(FRAME_OFFSETS.layerStart, true), end: view.getUint16(FRAME_OFFSETS.layerEnd, true) };
    return keyOf(readSessionId(bytes, FRAME_OFFSETS.sessionId), range);
  } catch {
    return undefined;
  }
}
