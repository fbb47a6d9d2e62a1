/**
 * ShardPeer: what every peer runs, whatever its runtime or link. It holds one executor per
 * assigned layer range (a peer may hold several, until the head unloads the ones no plan
 * uses), one KvStore for all of them (the memory budget — what the loaded ranges' weights
 * leave — and LRU eviction), and answers activation frames and control messages. Nothing a
 * sender puts in a frame or message can reach another session's state: refusals come back
 * as typed errors and the peer keeps serving.
 */
import { errorToControlMessage } from '../../shared/control-errors.ts';
import type { AssignMessage, ControlMessage } from '../../shared/control.ts';
import { ProtocolError } from '../../shared/protocol-error.ts';
import { decodeBatchFrame, encodeBatchFrame, isBatchFrame, type BatchEntry, type BatchFrame } from '../frames/batch-frame-codec.ts';
import { WIRE_WEIGHT_FORMATS, type WireWeightFormat, type WireWeights } from '../../shared/protocol.ts';
import { sameWeightSpec, weightSpecName } from '../model/quant/weight-format.ts';
import { decodeFrame, encodeFrame, type ActivationFrame } from '../frames/frame-codec.ts';
import { assertFiniteActivations } from '../frames/finite-activations.ts';
import type { LayerRange } from '../model/types.ts';
import type { KvState } from '../runtime/kv-state.ts';
import { KvStore } from '../runtime/kv-store.ts';
import { PrefixStore } from '../runtime/prefix-store.ts';
import { CacheMissError, type Activations, type ShardExecutor, type ShardStep } from '../runtime/shard-executor.ts';
import type { FrameReply, ShardService } from '../runtime/shard-service.ts';

/**
 * Loads the executor for an assigned range (from the head over HTTP, or a local checkpoint)
 * in the assigned weight format; an artifact in another format is refused (`unsupported_weights`).
 */
export interface ShardLoader {
  load(assign: AssignMessage): Promise<ShardExecutor>;
}

/** The weight format an assignment asks for: `assign.weights`, or (a 2.0 head) the float format equal to its dtype. */
export function assignedWeights(assign: AssignMessage): WireWeights {
  return assign.weights ?? { format: assign.dtype, blockSize: 0, accuracyLevel: 0 };
}

/** Refuses (ProtocolError 'unsupported_weights') an artifact whose weight format is not the assigned one. */
export function checkAssignedWeights(assign: AssignMessage, loaded: WireWeights, what: string): void {
  const wanted = assignedWeights(assign);
  if (!sameWeightSpec(wanted, loaded)) {
    throw new ProtocolError('unsupported_weights', `${what} holds weights ${weightSpecName(loaded)}, the assignment says ${weightSpecName(wanted)}: refusing to serve another format`);
  }
}

export type { FrameReply, ShardService } from '../runtime/shard-service.ts';

export interface ShardPeerOptions {
  readonly loader: ShardLoader;
  /** Memory for weights and KV together; KV gets what the loaded weights leave. */
  readonly memoryBudgetBytes: number;
  /** Called after each served frame (telemetry). */
  readonly onServed?: (frame: ActivationFrame, ms: number) => void;
  /** Memory for prefix entries (finished sessions' KV kept for reuse), apart from the budget above; 0 or absent: none kept. */
  readonly prefixBudgetBytes?: number;
  /** Weight formats this peer serves (what its hello announces); default: all of them. */
  readonly weightFormats?: readonly WireWeightFormat[];
}

/** A range as one number (start and end are u16 on the wire): no string per frame. */
const rangeKey = (r: LayerRange) => r.start * 0x10000 + r.end;
/** How many released session ids a peer remembers, to tell `unknown_session` from a cache miss. */
const RELEASED_MEMORY = 4096;

export class ShardPeer implements ShardService {
  private readonly executors = new Map<number, ShardExecutor>();
  private readonly loading = new Map<number, Promise<ShardExecutor>>();
  /** Steps running per range, and who waits for a range to be idle (an unload). */
  private readonly running = new Map<number, number>();
  private readonly idleWaiters = new Map<number, (() => void)[]>();
  /** The peer's KV (created with its first range). Protected: a test double evicts through it. */
  protected store: KvStore<unknown> | undefined;
  private readonly released = new Set<string>();
  private tokensServed = 0;
  private framesServed = 0;
  /** One-position (decode) frames: count, ms handling them whole, ms inside the executor. */
  private readonly decode = { frames: 0, busyMs: 0, runMs: 0 };
  private readonly batches = { frames: 0, entries: 0 };
  /** Prefix entries (created with the first range). Protected: a test double evicts through it. */
  protected prefixes: PrefixStore<unknown>;

  constructor(private readonly options: ShardPeerOptions) {
    this.prefixes = new PrefixStore(options.prefixBudgetBytes ?? 0);
  }

  /** Ranges loaded and ready. */
  get ranges(): LayerRange[] {
    return [...this.executors.values()].map((e) => e.range);
  }

  get devices(): string[] {
    return [...this.executors.values()].map((e) => e.device);
  }

  /** KV entries held (0 when every session was released). */
  get kvEntries(): number {
    return this.store?.size ?? 0;
  }

  /** Answer one binary activation frame. Never throws: failures become error replies. */
  async handleFrame(bytes: Uint8Array): Promise<FrameReply> {
    if (isBatchFrame(bytes)) return this.handleBatch(bytes);
    let frame: ActivationFrame | undefined;
    const received = performance.now();
    try {
      frame = decodeFrame(bytes);
      if (frame.kind === 'result') throw new ProtocolError('bad_frame', 'a peer does not accept result frames', this.context(frame));
      assertFiniteActivations(frame.activations, this.context(frame));
      const started = performance.now();
      const result = await this.run(frame);
      const ran = performance.now();
      this.framesServed++;
      this.tokensServed += frame.activations.tokens;
      this.options.onServed?.(frame, ran - started);
      const reply = encodeFrame({ ...frame, kind: 'result', activations: result });
      if (frame.activations.tokens === 1) {
        this.decode.frames++;
        this.decode.runMs += ran - started;
        this.decode.busyMs += performance.now() - received;
      }
      return { frame: reply };
    } catch (error) {
      return { error: errorToControlMessage(toWireError(error), frame ? this.context(frame) : { requestId: peekRequestId(bytes) }) };
    }
  }

  /** Answer one control message addressed to this peer (assign, release, ping, stats). */
  async handleControl(message: ControlMessage): Promise<ControlMessage> {
    const id = message.id;
    try {
      switch (message.kind) {
        case 'assign': {
          const started = Date.now();
          const executor = await this.ensureRange(message);
          const { format, blockSize, accuracyLevel } = executor.weights;
          return { kind: 'ready', id, modelKey: message.modelKey, range: executor.range, loadMs: Date.now() - started, device: executor.device, weights: { format, blockSize, accuracyLevel } };
        }
        case 'unload': {
          const { loaded, freedEntries } = await this.unloadRange(message.range);
          return { kind: 'unloaded', id, range: message.range, loaded, freedEntries };
        }
        case 'release': {
          let keptPrefixes: number | undefined;
          let freedEntries: number;
          if (message.keepPrefix && this.store) {
            const states = this.store.detach(message.sessionId);
            freedEntries = states.length;
            keptPrefixes = this.prefixes.keep(message.keepPrefix.prefixId, states, message.keepPrefix.length);
          } else {
            freedEntries = this.store?.release(message.sessionId) ?? 0;
          }
          this.remember(message.sessionId);
          return { kind: 'released', id, sessionId: message.sessionId, freedEntries, ...(keptPrefixes !== undefined && { keptPrefixes }) };
        }
        case 'fork':
          return this.fork(message.sessionId, message.prefixId, message.range, message.length, id);
        case 'ping':
          return { kind: 'pong', id, t: message.t };
        case 'stats':
          return this.stats(id);
        default:
          throw new ProtocolError('unknown_kind', `a peer does not answer '${message.kind}' messages`);
      }
    } catch (error) {
      return errorToControlMessage(toWireError(error), { id });
    }
  }

  stats(id?: string): ControlMessage {
    const s = this.store?.stats();
    const p = this.prefixes.stats();
    return {
      kind: 'stats',
      ...(id !== undefined && { id }),
      kvEntries: s?.entries ?? 0,
      kvBytes: s?.bytes ?? 0,
      kvBudgetBytes: this.kvBudget(),
      tokensServed: this.tokensServed,
      framesServed: this.framesServed,
      decodeFrames: this.decode.frames,
      decodeBusyMs: this.decode.busyMs,
      decodeRunMs: this.decode.runMs,
      batchFrames: this.batches.frames,
      batchedEntries: this.batches.entries,
      prefixEntries: p.entries,
      prefixBytes: p.bytes,
      prefixBudgetBytes: p.budgetBytes,
      prefixHits: p.hits,
      prefixEvictions: p.evictions,
    };
  }

  async dispose(): Promise<void> {
    this.store?.clear();
    this.prefixes.clear();
    const executors = [...this.executors.values()];
    this.executors.clear();
    await Promise.all(executors.map((e) => e.dispose()));
  }

  /**
   * Drop `range`: no new step starts on it, the steps running finish, then its KV and its
   * executor are freed and the KV budget gets its weights back. A range being loaded is
   * unloaded once it is.
   */
  private async unloadRange(range: LayerRange): Promise<{ loaded: boolean; freedEntries: number }> {
    const key = rangeKey(range);
    await this.loading.get(key)?.catch(() => undefined);
    const executor = this.executors.get(key);
    if (!executor) return { loaded: false, freedEntries: 0 };
    this.executors.delete(key);
    if ((this.running.get(key) ?? 0) > 0) await new Promise<void>((resolve) => this.idleWaiters.set(key, [...(this.idleWaiters.get(key) ?? []), resolve]));
    const freedEntries = this.store?.releaseRange(range) ?? 0;
    this.prefixes.releaseRange(range); // prefix entries on those layers could never be forked again
    await executor.dispose();
    this.store?.setBudget(this.kvBudget());
    return { loaded: true, freedEntries };
  }

  private async ensureRange(assign: AssignMessage): Promise<ShardExecutor> {
    const wanted = assignedWeights(assign);
    const formats = this.options.weightFormats ?? WIRE_WEIGHT_FORMATS;
    if (!formats.includes(wanted.format)) {
      throw new ProtocolError('unsupported_weights', `this peer serves weights ${formats.join(', ')}, not ${weightSpecName(wanted)}`);
    }
    const key = rangeKey(assign.range);
    const ready = this.executors.get(key);
    if (ready) {
      checkAssignedWeights(assign, ready.weights, `layers [${assign.range.start}, ${assign.range.end}) on this peer`);
      return ready;
    }
    let pending = this.loading.get(key);
    if (!pending) {
      pending = this.options.loader.load(assign);
      this.loading.set(key, pending);
    }
    try {
      const executor = await pending;
      try {
        checkAssignedWeights(assign, executor.weights, `the loaded shard of layers [${assign.range.start}, ${assign.range.end})`);
      } catch (error) {
        await executor.dispose();
        throw error;
      }
      this.executors.set(key, executor);
      this.store ??= new KvStore(executor.kvOps as never, this.kvBudget());
      this.store.setBudget(this.kvBudget());
      return executor;
    } finally {
      this.loading.delete(key);
    }
  }

  private async run(frame: ActivationFrame) {
    const context = this.context(frame);
    const executor = this.executors.get(rangeKey(frame.range));
    if (!executor || !this.store) {
      throw new ProtocolError('not_ready', `layers [${frame.range.start}, ${frame.range.end}) are not loaded on this peer`, context);
    }
    if (this.released.has(frame.sessionId)) {
      throw new ProtocolError('unknown_session', `session ${frame.sessionId} was released on this peer`, context);
    }
    // A prefill from position 0 (re)builds the state; any other step needs the state to exist.
    const kv = frame.startPosition === 0 ? this.store.acquire(frame.sessionId, frame.range) : this.store.find(frame.sessionId, frame.range);
    if (!kv) throw new ProtocolError('cache_miss', `no KV for session ${frame.sessionId} on layers [${frame.range.start}, ${frame.range.end})`, context);
    // The position rule (protocol 3.1): a frame that starts below the KV's length drops the
    // positions from its start on, then runs (a speculative step's rejected drafts, a rebuild
    // from 0); one that starts above it is a cache miss. Truncation is exact in both KV modes
    // (it lowers the length the graph reads); a state it left short is a cache miss too.
    if (kv.length > frame.startPosition) kv.truncate(frame.startPosition);
    if (kv.length < frame.startPosition) {
      throw new ProtocolError('cache_miss', `KV for session ${frame.sessionId} on layers [${frame.range.start}, ${frame.range.end}) holds ${kv.length} positions, the frame starts at ${frame.startPosition}`, context);
    }
    const key = rangeKey(frame.range);
    this.store.pin(kv);
    this.running.set(key, (this.running.get(key) ?? 0) + 1);
    try {
      return await executor.run({ sessionId: frame.sessionId, startPosition: frame.startPosition, hidden: frame.activations }, kv);
    } catch (error) {
      // A refused step must not leave an empty entry behind (a sender could pile them up).
      if (kv.length === 0) this.store.discard(kv);
      throw error;
    } finally {
      this.store.unpin(kv);
      this.store.enforceBudget(kv);
      this.stepEnded(key);
    }
  }

  /**
   * Start a session's KV on `range` from a prefix entry: its own copy of the first `length`
   * positions (the entry is never written). A missing or short entry is a cache miss.
   */
  private fork(sessionId: string, prefixId: string, range: LayerRange, length: number, id?: string): ControlMessage {
    const context = { sessionId };
    if (!this.executors.has(rangeKey(range)) || !this.store) throw new ProtocolError('not_ready', `layers [${range.start}, ${range.end}) are not loaded on this peer`, context);
    if (this.released.has(sessionId)) throw new ProtocolError('unknown_session', `session ${sessionId} was released on this peer`, context);
    const source = this.prefixes.find(prefixId, range, length);
    if (!source) throw new ProtocolError('cache_miss', `no prefix entry ${prefixId} of ${length} positions on layers [${range.start}, ${range.end})`, context);
    const existing = this.store.find(sessionId, range);
    if (existing) this.store.discard(existing);
    const kv = this.store.acquire(sessionId, range);
    if (!kv.copyFrom(source, length)) {
      this.store.discard(kv);
      throw new ProtocolError('cache_miss', `prefix entry ${prefixId} cannot be copied on this runtime`, context);
    }
    this.store.enforceBudget(kv);
    return { kind: 'forked', ...(id !== undefined && { id }), sessionId, length };
  }

  /** Answer a batched frame: each entry runs (or fails) on its own; entries of equal token count run together. */
  private async handleBatch(bytes: Uint8Array): Promise<FrameReply> {
    let frame: BatchFrame | undefined;
    try {
      frame = decodeBatchFrame(bytes);
      if (frame.kind !== 'batch') throw new ProtocolError('bad_frame', 'a peer does not accept batch result frames', { requestId: frame.requestId });
      const executor = this.executors.get(rangeKey(frame.range));
      if (!executor || !this.store) {
        throw new ProtocolError('not_ready', `layers [${frame.range.start}, ${frame.range.end}) are not loaded on this peer`, { requestId: frame.requestId });
      }
      // Counted as running on its range, like a single step: an unload waits for it.
      const key = rangeKey(frame.range);
      this.running.set(key, (this.running.get(key) ?? 0) + 1);
      let results: BatchEntry[];
      try {
        results = await this.runEntries(executor, frame);
      } finally {
        this.stepEnded(key);
      }
      this.batches.frames++;
      this.batches.entries += frame.entries.length;
      return { frame: encodeBatchFrame({ ...frame, kind: 'batch-result', entries: results }) };
    } catch (error) {
      return { error: errorToControlMessage(toWireError(error), { requestId: frame?.requestId ?? peekRequestId(bytes) }) };
    }
  }

  private async runEntries(executor: ShardExecutor, frame: BatchFrame): Promise<BatchEntry[]> {
    const store = this.store!;
    const results: BatchEntry[] = new Array(frame.entries.length);
    const failed = (i: number, error: unknown) => {
      const e = frame.entries[i];
      const wire = toWireError(error);
      const code = wire instanceof ProtocolError ? wire.code : 'internal';
      const message = wire instanceof Error ? wire.message : String(wire);
      results[i] = { sessionId: e.sessionId, startPosition: e.startPosition, tokens: e.error ? e.tokens : e.activations.tokens, error: { code, message } };
    };
    // Checks per entry; the ones that pass are grouped by token count.
    const groups = new Map<number, { index: number; step: ShardStep; kv: KvState<unknown> }[]>();
    frame.entries.forEach((e, i) => {
      try {
        if (e.error) throw new ProtocolError('bad_frame', 'a batch entry carries an error');
        const context = { sessionId: e.sessionId, requestId: frame.requestId };
        if (this.released.has(e.sessionId)) throw new ProtocolError('unknown_session', `session ${e.sessionId} was released on this peer`, context);
        assertFiniteActivations(e.activations, context);
        const kv = e.startPosition === 0 ? store.acquire(e.sessionId, frame.range) : store.find(e.sessionId, frame.range);
        if (!kv) throw new ProtocolError('cache_miss', `no KV for session ${e.sessionId} on layers [${frame.range.start}, ${frame.range.end})`, context);
        // The position rule per entry, as for a single frame (a speculative step's rejected drafts).
        if (kv.length > e.startPosition) kv.truncate(e.startPosition);
        if (kv.length < e.startPosition) throw new CacheMissError(e.sessionId, kv.length, e.startPosition);
        const group = groups.get(e.activations.tokens) ?? [];
        group.push({ index: i, step: { sessionId: e.sessionId, startPosition: e.startPosition, hidden: e.activations }, kv });
        groups.set(e.activations.tokens, group);
      } catch (error) {
        failed(i, error);
      }
    });
    for (const [tokens, group] of groups) {
      // Several positions with past context run one entry at a time (a speculative step, a
      // pipelined chunk): onnxruntime's GroupQueryAttention takes batch 1 there.
      const max = tokens === 1 ? Math.max(1, executor.maxBatch ?? 1) : 1;
      for (let at = 0; at < group.length; at += max) {
        const chunk = group.slice(at, at + max);
        for (const c of chunk) store.pin(c.kv);
        const started = performance.now();
        try {
          const outs: Activations[] =
            executor.runBatch && chunk.length > 1
              ? await executor.runBatch(chunk.map((c) => c.step), chunk.map((c) => c.kv))
              : [await executor.run(chunk[0].step, chunk[0].kv)];
          chunk.forEach((c, j) => {
            results[c.index] = { sessionId: c.step.sessionId, startPosition: c.step.startPosition, activations: outs[j] };
            this.tokensServed += c.step.hidden.tokens;
          });
          if (chunk[0].step.hidden.tokens === 1) {
            this.decode.frames += chunk.length;
            this.decode.runMs += performance.now() - started;
          }
        } catch (error) {
          for (const c of chunk) failed(c.index, error);
        } finally {
          for (const c of chunk) {
            store.unpin(c.kv);
            if (c.kv.length === 0 && !c.kv.isDisposed) store.discard(c.kv);
          }
          for (const c of chunk) if (!c.kv.isDisposed) store.enforceBudget(c.kv);
        }
      }
    }
    this.framesServed++;
    return results;
  }

  private stepEnded(key: number): void {
    const left = (this.running.get(key) ?? 1) - 1;
    if (left > 0) return void this.running.set(key, left);
    this.running.delete(key);
    const waiters = this.idleWaiters.get(key);
    this.idleWaiters.delete(key);
    for (const wake of waiters ?? []) wake();
  }

  /** The memory budget less the weights of every loaded range. */
  private kvBudget(): number {
    let weights = 0;
    for (const executor of this.executors.values()) weights += executor.weightsBytes;
    return Math.max(0, this.options.memoryBudgetBytes - weights);
  }

  private remember(sessionId: string): void {
    this.released.add(sessionId);
    if (this.released.size > RELEASED_MEMORY) this.released.delete(this.released.values().next().value!);
  }

  private context(frame: ActivationFrame) {
    return { sessionId: frame.sessionId, requestId: frame.requestId };
  }
}

function toWireError(error: unknown): unknown {
  if (error instanceof CacheMissError) return new ProtocolError('cache_miss', error.message, { sessionId: error.sessionId });
  if (error instanceof RangeError) return new ProtocolError('wrong_payload_size', error.message);
  return error;
}

/** The request id of a frame too malformed to decode, if its header gets that far. */
function peekRequestId(bytes: Uint8Array): number | undefined {
  if (bytes.byteLength < 12) return undefined;
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(8, true);
}
