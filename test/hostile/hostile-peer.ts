/**
 * A hostile shard peer: it joins a head over a real WebSocket with the join token, says
 * hello, loads the layers it is assigned (a real ShardPeer of stories260k, so its first
 * answers are right and it gets routed), and then answers frames — after `goodFrames` honest
 * ones — the way its `behaviour` says: bytes that are no frame, frames cut short or padded,
 * lengths and token counts that lie, other sessions' and requests' ids, the wrong kind or
 * version, NaN and infinities, the wrong hidden size, `error` messages, silence, every answer
 * under one request id, its own input echoed back (well-formed and wrong: only `--verify`
 * sees it). Some behaviours are about control messages: never answering `assign`, answering
 * it with the wrong kind, or with a `ready` for other layers. `helloRefusal` sends hellos the
 * head must refuse.
 */
import { decodeBatchFrame, encodeBatchFrame, isBatchFrame, type BatchFrame } from '../../src/core/frames/batch-frame-codec.ts';
import { encodeFrame, decodeFrame } from '../../src/core/frames/frame-codec.ts';
import type { Activations } from '../../src/core/model/activations.ts';
import { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { parseControlMessage, serializeControlMessage, type ControlMessage } from '../../src/shared/control.ts';
import { FRAME_HEADER_BYTES, FRAME_OFFSETS, frameRequestId, stampFrameRequestId } from '../../src/shared/frame-layout.ts';
import { PROTOCOL_VERSION } from '../../src/shared/protocol.ts';
import { localShardLoader } from '../../src/node/local-shard-loader.ts';
import type { LocalModel } from '../../src/node/local-model.ts';
import { dialSocket, type DialedSocket } from '../../src/node/net/ws-dial.ts';

export const FRAME_BEHAVIOURS = [
  'garbage',
  'garbage-text',
  'short-frame',
  'header-only',
  'oversized-frame',
  'lying-length',
  'lying-tokens',
  'extra-token',
  'foreign-session',
  'foreign-request',
  'one-request-id',
  'wrong-kind',
  'wrong-version',
  'nan',
  'infinity',
  'wrong-hidden-size',
  'error-internal',
  'error-not-ready',
  'error-unknown-session',
  'error-cache-miss',
  'error-unknown-code',
  'silent',
] as const;
export const CONTROL_BEHAVIOURS = ['never-ready', 'ready-wrong-kind', 'ready-other-range'] as const;
export type Behaviour = (typeof FRAME_BEHAVIOURS)[number] | (typeof CONTROL_BEHAVIOURS)[number] | 'echo' | 'honest' | 'answer-twice';

export interface HostilePeerOptions {
  readonly headUrl: string; // ws://…/peer/ws
  readonly joinToken: string;
  readonly peerId: string;
  readonly behaviour: Behaviour;
  readonly model: LocalModel;
  /** Frames answered honestly before the behaviour starts (default 3). */
  readonly goodFrames?: number;
  /** What it claims in its hello (large: the planner then gives it layers). */
  readonly memoryBudgetBytes?: number;
}

const garbage = (length: number, seed: number) => Uint8Array.from({ length }, (_, i) => (i * 131 + seed * 17 + 7) & 0xff);

function patched(bytes: Uint8Array, patch: (view: DataView, copy: Uint8Array) => void): Uint8Array {
  const copy = bytes.slice();
  patch(new DataView(copy.buffer), copy);
  return copy;
}

export class HostilePeer {
  /** Frames received, and answered against the behaviour. */
  frames = 0;
  misbehaved = 0;
  assigns = 0;
  closedReason: string | undefined;
  private firstRequestId: number | undefined;

  private constructor(
    private readonly options: HostilePeerOptions,
    private readonly dialed: DialedSocket,
    private readonly shard: ShardPeer,
  ) {}

  static async join(options: HostilePeerOptions): Promise<HostilePeer> {
    const dialed = await dialSocket(options.headUrl);
    const shard = new ShardPeer({ loader: localShardLoader(options.model, { device: 'cpu', threads: 1 }), memoryBudgetBytes: 1 << 30 });
    const peer = new HostilePeer(options, dialed, shard);
    let welcomed!: () => void;
    let refused!: (error: Error) => void;
    const welcome = new Promise<void>((resolve, reject) => ((welcomed = resolve), (refused = reject)));
    dialed.attach({
      receive: (data) => {
        if (typeof data === 'string' && data.includes('"kind":"welcome"')) return welcomed();
        if (typeof data === 'string' && data.includes('"kind":"error"')) refused(new Error(data));
        void peer.receive(data);
      },
      terminated: (reason) => {
        peer.closedReason = reason;
        refused(new Error(reason));
      },
    });
    dialed.socket.send(
      serializeControlMessage({ kind: 'hello', id: 'hello', protocol: PROTOCOL_VERSION, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: options.memoryBudgetBytes ?? 64 * 2 ** 30, peerId: options.peerId, joinToken: options.joinToken }),
    );
    await welcome;
    return peer;
  }

  close(): void {
    this.dialed.socket.close(1000, 'test done');
    void this.shard.dispose();
  }

  private send(data: string | Uint8Array): void {
    this.dialed.socket.send(data);
  }

  private async receive(data: string | Uint8Array): Promise<void> {
    if (typeof data !== 'string') return this.frame(data);
    let message: ControlMessage;
    try {
      message = parseControlMessage(data);
    } catch {
      return;
    }
    const { behaviour } = this.options;
    if (message.kind === 'assign') {
      this.assigns++;
      if (behaviour === 'never-ready') return;
      if (behaviour === 'ready-wrong-kind') return this.send(serializeControlMessage({ kind: 'pong', id: message.id, t: 1 }));
      const answer = await this.shard.handleControl(message);
      if (behaviour === 'ready-other-range' && answer.kind === 'ready') {
        const other = message.range.start === 0 ? { start: 1, end: 2 } : { start: 0, end: 1 };
        return this.send(serializeControlMessage({ ...answer, range: other }));
      }
      return this.send(serializeControlMessage(answer));
    }
    if (message.kind === 'welcome' || message.kind === 'error') return;
    this.send(serializeControlMessage(await this.shard.handleControl(message)));
  }

  /** The honest answer, then what the behaviour makes of it. */
  private async frame(bytes: Uint8Array): Promise<void> {
    this.frames++;
    const requestId = frameRequestId(bytes)!;
    this.firstRequestId ??= requestId;
    const { behaviour } = this.options;
    const honest = behaviour === 'honest' || this.frames <= (this.options.goodFrames ?? 3);
    // Concurrent streams reach a peer as batched frames (protocol 3): the same lies, told in
    // the batched form (byte patches hit the shared header; content lies hit the first entry).
    const batch = isBatchFrame(bytes) ? decodeBatchFrame(bytes) : undefined;
    const request = batch ? undefined : decodeFrame(bytes);
    const sessionId = batch ? batch.entries[0].sessionId : request!.sessionId;
    if (!honest && behaviour === 'echo') {
      this.misbehaved++;
      if (batch) return this.send(encodeBatchFrame({ ...batch, kind: 'batch-result' }));
      return this.send(encodeFrame({ ...request!, kind: 'result' }));
    }
    const reply = await this.shard.handleFrame(bytes);
    if (!('frame' in reply)) return this.send(serializeControlMessage(reply.error));
    if (honest) return this.send(reply.frame);
    if (behaviour === 'answer-twice') {
      this.send(reply.frame);
      return this.send(reply.frame);
    }
    this.misbehaved++;
    const error = (code: string) => this.send(JSON.stringify({ kind: 'error', code, message: `hostile ${code}`, requestId, sessionId }));
    if (batch) {
      const lie = batchLie(behaviour, decodeBatchFrame(reply.frame));
      if (lie) return this.send(lie);
    }
    const answer = batch ? undefined : decodeFrame(reply.frame);
    const a = answer?.activations as Activations;
    switch (behaviour) {
      case 'garbage':
        return this.send(garbage(200, this.frames));
      case 'garbage-text':
        return this.send('\u0000garbage{{{');
      case 'short-frame':
        return this.send(reply.frame.subarray(0, FRAME_HEADER_BYTES + Math.floor((reply.frame.byteLength - FRAME_HEADER_BYTES) / 2)));
      case 'header-only':
        return this.send(reply.frame.subarray(0, FRAME_HEADER_BYTES));
      case 'oversized-frame': {
        const big = new Uint8Array(reply.frame.byteLength + 16 * 2 ** 20);
        big.set(reply.frame);
        return this.send(big);
      }
      case 'lying-length':
        return this.send(patched(reply.frame, (view) => view.setUint32(FRAME_OFFSETS.payloadLength, view.getUint32(FRAME_OFFSETS.payloadLength, true) + 4, true)));
      case 'lying-tokens':
        return this.send(patched(reply.frame, (view) => view.setUint32(FRAME_OFFSETS.tokenCount, view.getUint32(FRAME_OFFSETS.tokenCount, true) + 1, true)));
      case 'extra-token': {
        const data = new Float32Array(a.data.length + a.hiddenSize);
        data.set(a.data as Float32Array);
        return this.send(encodeFrame({ ...answer!, activations: { ...a, data, tokens: a.tokens + 1 } }));
      }
      case 'foreign-session':
        return this.send(encodeFrame({ ...answer!, sessionId: '00000000-0000-4000-8000-00000000beef' }));
      case 'foreign-request':
        return this.send(patched(reply.frame, (_, copy) => stampFrameRequestId(copy, (requestId + 1000) >>> 0)));
      case 'one-request-id':
        return this.send(patched(reply.frame, (_, copy) => stampFrameRequestId(copy, this.firstRequestId!)));
      case 'wrong-kind':
        return this.send(patched(reply.frame, (_, copy) => (copy[FRAME_OFFSETS.kind] = 1)));
      case 'wrong-version':
        return this.send(patched(reply.frame, (_, copy) => (copy[FRAME_OFFSETS.versionMajor] = PROTOCOL_VERSION.major + 1)));
      case 'nan':
      case 'infinity': {
        const data = Float32Array.from(a.data as Float32Array);
        data[data.length - 1] = behaviour === 'nan' ? Number.NaN : Number.POSITIVE_INFINITY;
        return this.send(encodeFrame({ ...answer!, activations: { ...a, data } }));
      }
      case 'wrong-hidden-size': {
        const half = a.hiddenSize / 2;
        return this.send(encodeFrame({ ...answer!, activations: { ...a, hiddenSize: half, data: (a.data as Float32Array).slice(0, a.tokens * half) } }));
      }
      case 'error-internal':
        return error('internal');
      case 'error-not-ready':
        return error('not_ready');
      case 'error-unknown-session':
        return error('unknown_session');
      case 'error-cache-miss':
        return error('cache_miss');
      case 'error-unknown-code':
        return error('made_up_code');
      case 'silent':
        return;
      default:
        return this.send(reply.frame);
    }
  }
}

/**
 * A batched answer's content lie for `behaviour`, told on its first entry (or its frame-wide
 * hidden size); undefined for the behaviours that patch bytes, answer with an error, or stay
 * silent, which the single-frame code applies to the batched bytes as they are.
 */
function batchLie(behaviour: Behaviour, answer: BatchFrame): Uint8Array | undefined {
  const [first, ...rest] = answer.entries;
  if (first.error) return undefined;
  const a = first.activations;
  const withFirst = (activations: Activations, sessionId = first.sessionId) => encodeBatchFrame({ ...answer, entries: [{ ...first, sessionId, activations }, ...rest] });
  switch (behaviour) {
    case 'extra-token': {
      const data = new Float32Array(a.data.length + a.hiddenSize);
      data.set(a.data as Float32Array);
      return withFirst({ ...a, data, tokens: a.tokens + 1 });
    }
    case 'foreign-session':
      return withFirst(a, '00000000-0000-4000-8000-00000000beef');
    case 'nan':
    case 'infinity': {
      const data = Float32Array.from(a.data as Float32Array);
      data[data.length - 1] = behaviour === 'nan' ? Number.NaN : Number.POSITIVE_INFINITY;
      return withFirst({ ...a, data });
    }
    case 'wrong-hidden-size': {
      const half = answer.hiddenSize / 2;
      const cut = (e: (typeof answer.entries)[number]) => (e.error ? e : { ...e, activations: { ...e.activations, hiddenSize: half, data: (e.activations.data as Float32Array).slice(0, e.activations.tokens * half) } });
      return encodeBatchFrame({ ...answer, hiddenSize: half, entries: answer.entries.map(cut) });
    }
    default:
      return undefined;
  }
}

/** Send `hello` with `fields` over a new socket; the head's answer (an error) and whether it closed the socket. */
export async function helloRefusal(headUrl: string, fields: Record<string, unknown>): Promise<{ answer: ControlMessage; closed: string }> {
  const dialed = await dialSocket(headUrl);
  let closed!: (reason: string) => void;
  const closing = new Promise<string>((resolve) => (closed = resolve));
  const answers: ControlMessage[] = [];
  dialed.attach({ receive: (data) => typeof data === 'string' && answers.push(JSON.parse(data) as ControlMessage), terminated: (reason) => closed(reason) });
  dialed.socket.send(JSON.stringify({ kind: 'hello', id: 'h', protocol: PROTOCOL_VERSION, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, peerId: 'intruder', ...fields }));
  const reason = await Promise.race([closing, new Promise<string>((resolve) => setTimeout(() => resolve('still open'), 10_000))]);
  return { answer: answers[0]!, closed: reason };
}
