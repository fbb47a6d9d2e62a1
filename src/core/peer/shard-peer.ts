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
import { ProtocolError, type ProtocolErrorContext } from '../../shared/protocol-error.ts';
import { decodeBatchFrame, encodeBatchFrame, isBatchFrame, type BatchEntry, type BatchFrame } from '../frames/batch-frame-codec.ts';
import { WIRE_WEIGHT_FORMATS, type WireWeightFormat, type WireWeights } from '../../shared/protocol.ts';
import { weightSpecName } from '../model/quant/weight-format.ts';
import { decodeFrame, encodeFrame, type ActivationFrame } from '../frames/frame-codec.ts';
import { assertFiniteActivations } from '../frames/finite-activations.ts';
import type { LayerRange } from '../model/types.ts';
import { systemClock, type Clock } from '../runtime/clock.ts';
import type { KvState } from '../runtime/kv-state.ts';
import { KvStore } from '../runtime/kv-store.ts';
import { PrefixStore } from '../runtime/prefix-store.ts';
import { CacheMissError, type Activations, type ShardExecutor, type ShardStep } from '../runtime/shard-executor.ts';
import type { FrameReply, ShardService } from '../runtime/shard-service.ts';
import { RangeActivity, ReleasedSessions, ServedCounts } from './peer-counts.ts';
import { peekRequestId, toWireError } from './wire-errors.ts';
import { assignedWeights, checkAssignedWeights, type ShardLoader } from './shard-loader.ts';

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
  /** Times the peer reports (load, run and busy ms); the system clock by default. */
  readonly clock?: Clock;
}

/** A range as one number (start and end are u16 on the wire): no string per frame. */
const rangeKey = (r: LayerRange) => r.start * 0x10000 + r.end;

export class ShardPeer implements ShardService {
  private readonly executors = new Map<number, ShardExecutor>();
  private readonly loading = new Map<number, Promise<ShardExecutor>>();
  /** Steps running per range, and who waits for a range to be idle (an unload). */
  private readonly activity = new RangeActivity();
  /** The peer's KV (created with its first range). Protected: a test double evicts through it. */
  protected store: KvStore<unknown> | undefined;
  private readonly released = new ReleasedSessions();
  private readonly served = new ServedCounts();
  /** Prefix entries (created with the first range). Protected: a test double evicts through it. */
  protected prefixes: PrefixStore<unknown>;

  private readonly clock: Clock;

  constructor(private readonly options: ShardPeerOptions) {
    this.prefixes = new PrefixStore(options.prefixBudgetBytes ?? 0);
    this.clock = options.clock ?? systemClock;
  }

  /** Ranges loaded and ready. */
  get ranges(): LayerRange[] {
    return [...this.executors.values()].map((e) => e.range);
  }

  get devices(): string[] {
    return [...this.executors.values()].map((e) => e.loaded.device);
  }

  /** KV entries held (0 when every session was released). */
  get kvEntries(): number {
    return this.store?.size ?? 0;
  }

  /**
   * Answer one binary activation frame. Never throws: failures become error replies. A single
   * frame is a batch of one: both kinds go through `runEntries`, with the same checks.
   */
  async handleFrame(bytes: Uint8Array): Promise<FrameReply> {
    return isBatchFrame(bytes) ? this.handleBatch(bytes) : this.handleSingle(bytes);
  }

  /** Answer one control message addressed to this peer (assign, release, ping, stats). */
  async handleControl(message: ControlMessage): Promise<ControlMessage> {
    const id = message.id;
    try {
      switch (message.kind) {
        case 'assign': {
          const started = this.clock.now();
          const executor = await this.ensureRange(message);
          const { format, blockSize, accuracyLevel } = executor.loaded.weights;
          return { kind: 'ready', id, modelKey: message.modelKey, range: executor.range, loadMs: Math.round(this.clock.now() - started), device: executor.loaded.device, weights: { format, blockSize, accuracyLevel } };
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
            this.released.add(message.sessionId);
            // A refused keep (an unknown parent, a shared length beyond it) frees the states and answers a typed error.
            keptPrefixes = this.prefixes.keep(message.keepPrefix.prefixId, states, message.keepPrefix.length, message.keepPrefix.parent);
          } else {
            freedEntries = this.store?.release(message.sessionId) ?? 0;
          }
          this.released.add(message.sessionId);
          return { kind: 'released', id, sessionId: message.sessionId, freedEntries, ...(keptPrefixes !== undefined && { keptPrefixes }) };
        }
        case 'fork':
          return this.fork(message.sessionId, message.prefixId, message.range, message.length, id);
        case 'forget':
          // 3.5: entries the head's registry forgot (unknown ids ignored); answered by the figures after.
          this.prefixes.forget(message.prefixIds);
          return this.stats(id);
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
      ...this.served.fields(),
      prefixEntries: p.entries,
      prefixBytes: p.bytes,
      prefixBudgetBytes: p.budgetBytes,
      prefixHits: p.hits,
      prefixEvictions: p.evictions,
    };
  }

  async forgetSessions(): Promise<void> {
    this.store?.clear();
    this.prefixes.clear();
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
    await this.activity.idle(key);
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
      checkAssignedWeights(assign, ready.loaded.weights, `layers [${assign.range.start}, ${assign.range.end}) on this peer`);
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
        checkAssignedWeights(assign, executor.loaded.weights, `the loaded shard of layers [${assign.range.start}, ${assign.range.end})`);
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

  /**
   * Start a session's KV on `range` from a prefix entry: its own copy of the first `length`
   * positions (the entry is never written). A missing or short entry is a cache miss.
   */
  private fork(sessionId: string, prefixId: string, range: LayerRange, length: number, id?: string): ControlMessage {
    const context = { sessionId };
    this.executorFor(range, context);
    this.checkLive(sessionId, context);
    const store = this.store!;
    const existing = store.find(sessionId, range);
    if (existing) store.discard(existing);
    const kv = store.acquire(sessionId, range);
    const copied = this.prefixes.fork(prefixId, range, length, kv);
    if (!copied) {
      store.discard(kv);
      if (copied === undefined) throw new ProtocolError('cache_miss', `no prefix entry ${prefixId} of ${length} positions on layers [${range.start}, ${range.end})`, context);
      throw new ProtocolError('cache_miss', `prefix entry ${prefixId} cannot be copied on this runtime`, context);
    }
    store.enforceBudget(kv);
    return { kind: 'forked', ...(id !== undefined && { id }), sessionId, length };
  }

  /** A single frame: its one entry's answer, or its refusal as an error reply naming the session and request. */
  private async handleSingle(bytes: Uint8Array): Promise<FrameReply> {
    let frame: ActivationFrame | undefined;
    const received = this.clock.now();
    try {
      frame = decodeFrame(bytes);
      // Chain frames reach a peer through its ChainForwarder (chain-forwarder.ts), which hands over a prefill/decode.
      if (frame.kind !== 'prefill' && frame.kind !== 'decode') throw new ProtocolError('bad_frame', `a peer does not accept ${frame.kind} frames here`, contextOf(frame));
      const entry: BatchEntry = { sessionId: frame.sessionId, startPosition: frame.startPosition, activations: frame.activations };
      const [answer] = await this.runFrame(frame.range, [entry], frame.requestId);
      if ('error' in answer) throw answer.error;
      this.served.frames++;
      this.options.onServed?.(frame, answer.ms);
      const reply = encodeFrame({ ...frame, kind: 'result', activations: answer.activations });
      if (frame.activations.tokens === 1) this.served.decode.busyMs += this.clock.now() - received;
      return { frame: reply };
    } catch (error) {
      return { error: errorToControlMessage(toWireError(error), frame ? contextOf(frame) : { requestId: peekRequestId(bytes) }) };
    }
  }

  /** A batched frame: each entry answered or refused on its own. */
  private async handleBatch(bytes: Uint8Array): Promise<FrameReply> {
    let frame: BatchFrame | undefined;
    try {
      frame = decodeBatchFrame(bytes);
      if (frame.kind !== 'batch') throw new ProtocolError('bad_frame', 'a peer does not accept batch result frames', { requestId: frame.requestId });
      const answers = await this.runFrame(frame.range, frame.entries, frame.requestId);
      this.served.frames++;
      this.served.batches.frames++;
      this.served.batches.entries += frame.entries.length;
      const entries = answers.map((answer, i): BatchEntry => {
        const e = frame!.entries[i];
        if (!('error' in answer)) return { sessionId: e.sessionId, startPosition: e.startPosition, activations: answer.activations };
        const wire = toWireError(answer.error);
        const code = wire instanceof ProtocolError ? wire.code : 'internal';
        const message = wire instanceof Error ? wire.message : String(wire);
        return { sessionId: e.sessionId, startPosition: e.startPosition, tokens: e.error ? e.tokens : e.activations.tokens, error: { code, message } };
      });
      return { frame: encodeBatchFrame({ ...frame, kind: 'batch-result', entries }) };
    } catch (error) {
      return { error: errorToControlMessage(toWireError(error), { requestId: frame?.requestId ?? peekRequestId(bytes) }) };
    }
  }

  /**
   * Run a frame's entries on the executor of `range` (not loaded: the whole frame is refused).
   * Each entry is checked on its own — an entry carrying an error, a released session, values
   * that are not finite, KV it needs and the peer lacks (the position rule) — and the ones that
   * pass run grouped by token count. Counted as running on its range: an unload waits for it.
   */
  private async runFrame(range: LayerRange, entries: readonly BatchEntry[], requestId: number): Promise<EntryAnswer[]> {
    const executor = this.executorFor(range, { requestId, ...(entries.length === 1 && { sessionId: entries[0].sessionId }) });
    const key = rangeKey(range);
    this.activity.started(key);
    try {
      return await this.runEntries(executor, range, entries, requestId);
    } finally {
      this.activity.ended(key);
    }
  }

  private async runEntries(executor: ShardExecutor, range: LayerRange, entries: readonly BatchEntry[], requestId: number): Promise<EntryAnswer[]> {
    const store = this.store!;
    const answers: EntryAnswer[] = new Array(entries.length);
    const groups = new Map<number, { index: number; step: ShardStep; kv: KvState<unknown> }[]>();
    entries.forEach((e, i) => {
      try {
        if (e.error) throw new ProtocolError('bad_frame', 'a batch entry carries an error');
        const context = { sessionId: e.sessionId, requestId };
        this.checkLive(e.sessionId, context);
        assertFiniteActivations(e.activations, context);
        const kv = this.kvFor(store, e.sessionId, range, e.startPosition, context);
        const group = groups.get(e.activations.tokens) ?? [];
        group.push({ index: i, step: { sessionId: e.sessionId, startPosition: e.startPosition, hidden: e.activations }, kv });
        groups.set(e.activations.tokens, group);
      } catch (error) {
        answers[i] = { error };
      }
    });
    for (const [tokens, group] of groups) {
      // Several positions with past context run one entry at a time (a speculative step, a
      // pipelined chunk): onnxruntime's GroupQueryAttention takes batch 1 there.
      const max = tokens === 1 ? Math.max(1, executor.batch?.max ?? 1) : 1;
      for (let at = 0; at < group.length; at += max) {
        const chunk = group.slice(at, at + max);
        for (const c of chunk) store.pin(c.kv);
        const started = this.clock.now();
        try {
          const outs: Activations[] =
            executor.batch && chunk.length > 1
              ? await executor.batch.run(chunk.map((c) => c.step), chunk.map((c) => c.kv))
              : [await executor.run(chunk[0].step, chunk[0].kv)];
          const ms = this.clock.now() - started;
          chunk.forEach((c, j) => {
            answers[c.index] = { activations: outs[j], ms };
            this.served.tokens += c.step.hidden.tokens;
          });
          if (tokens === 1) {
            this.served.decode.frames += chunk.length;
            this.served.decode.runMs += ms;
          }
        } catch (error) {
          for (const c of chunk) answers[c.index] = { error };
        } finally {
          for (const c of chunk) {
            store.unpin(c.kv);
            // A refused step must not leave an empty entry behind (a sender could pile them up).
            if (c.kv.length === 0 && !c.kv.isDisposed) store.discard(c.kv);
          }
          for (const c of chunk) if (!c.kv.isDisposed) store.enforceBudget(c.kv);
        }
      }
    }
    return answers;
  }

  /** The executor of a loaded range; ProtocolError('not_ready') otherwise. */
  private executorFor(range: LayerRange, context: ProtocolErrorContext): ShardExecutor {
    const executor = this.executors.get(rangeKey(range));
    if (!executor || !this.store) throw new ProtocolError('not_ready', `layers [${range.start}, ${range.end}) are not loaded on this peer`, context);
    return executor;
  }

  /** ProtocolError('unknown_session') for a session this peer released. */
  private checkLive(sessionId: string, context: ProtocolErrorContext): void {
    if (this.released.has(sessionId)) throw new ProtocolError('unknown_session', `session ${sessionId} was released on this peer`, context);
  }

  /**
   * The KV a step at `startPosition` runs on: a prefill from position 0 (re)builds the state,
   * any other step needs it to exist. The position rule (protocol 3.1): a step that starts
   * below the KV's length drops the positions from its start on (a speculative step's rejected
   * drafts, a rebuild from 0); one that starts above it is a cache miss. Truncation is exact in
   * both KV modes (it lowers the length the graph reads); a state it left short is a cache miss too.
   */
  private kvFor(store: KvStore<unknown>, sessionId: string, range: LayerRange, startPosition: number, context: ProtocolErrorContext): KvState<unknown> {
    const kv = startPosition === 0 ? store.acquire(sessionId, range) : store.find(sessionId, range);
    if (!kv) throw new ProtocolError('cache_miss', `no KV for session ${sessionId} on layers [${range.start}, ${range.end})`, context);
    if (kv.length > startPosition) kv.truncate(startPosition);
    if (kv.length < startPosition) throw new CacheMissError(sessionId, kv.length, startPosition);
    return kv;
  }

  /** The memory budget less the weights of every loaded range. */
  private kvBudget(): number {
    let weights = 0;
    for (const executor of this.executors.values()) weights += executor.loaded.weightsBytes;
    return Math.max(0, this.options.memoryBudgetBytes - weights);
  }

}

/** One entry's outcome: its answer and the run's time, or what refused it. */
type EntryAnswer = { readonly activations: Activations; readonly ms: number } | { readonly error: unknown };

function contextOf(frame: ActivationFrame): ProtocolErrorContext {
  return { sessionId: frame.sessionId, requestId: frame.requestId };
}
