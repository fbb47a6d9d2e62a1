/**
 * Hot KV State: the KV cache of one session on one shard. It owns its tensors, one key and
 * one value tensor per layer, each [1, kvHeads, capacity, headDim] with the first `length`
 * positions valid. Two ways to fill it, one per runtime:
 *
 * - **pool** (CPU, wasm): `reserve(total)` makes room (growing in blocks, so a decode step
 *   allocates nothing), the executor writes the new positions into the tensors in place and
 *   `commit(total)` records them. A step costs the new positions, not the whole cache.
 * - **replace** (WebGPU, where KV stays in GPU buffers the JS API cannot write into):
 *   `append(present, total)` takes the present tensors the step returned and disposes the
 *   replaced ones.
 *
 * `truncate(length)` only lowers `length` (exact and cheap in both: the graph reads each
 * entry's first past length (its `seqlens_k`), so nothing is rebuilt). `dispose` frees everything
 * exactly once. `bytes` counts what the tensors hold (their capacity), which is what the
 * peer's budget must cover.
 *
 * Sliding-window layers (`KvTensorOps.window`, pool mode): their tensors keep only the
 * positions a later query can still see. When a step would overflow their room, the oldest
 * positions are dropped (`offsetOf`), keeping the window less one plus a little slack for a
 * rollback, so their room stays at `windowKvPositions` (of WINDOW_BLOCK_POSITIONS) and their
 * bytes stop growing past the window. Truncating behind what they still hold empties the state
 * (a cache miss: the hop re-prefills). In replace mode (KV on the GPU) each step's present
 * holds their held positions plus the new ones; once that passes `replaceWindowPositions`, `windowTrim` says which positions to keep
 * and the executor copies them on the device (its trim graph) into `compactWindow`, so their
 * memory is bounded the same way.
 */
import { windowKvPositions, type KvWindow } from '../model/layer-attention.ts';
import type { LayerRange } from '../model/types.ts';

/** How a runtime measures, grows and frees its tensor type (ORT tensors, GPU buffers, …). */
export interface KvTensorOps<T> {
  /** Bytes held by the tensor. */
  bytes(tensor: T): number;
  /** Positions the tensor has room for (its dims[2]). */
  capacity(tensor: T): number;
  /**
   * A new [1, kvHeads, capacity, headDim] tensor holding the first `length` positions of
   * `tensor` (none when absent), or undefined when this runtime cannot (KV on the GPU).
   * `tensor` is left as it was.
   */
  grow(tensor: T | undefined, capacity: number, length: number, offset?: number): T | undefined; // offset: the first position copied (default 0)
  /**
   * A new [1, kvHeads, capacity, headDim] tensor holding `parts` one after the other (each
   * `count` positions of `tensor` from `offset`), or undefined when this runtime cannot (KV on
   * the GPU). Absent: the runtime cannot (its prefix entries are whole copies).
   */
  join?(parts: readonly KvPart<T>[], capacity: number): T | undefined;
  dispose(tensor: T): void;
  /** The model's sliding window and the layers it applies to: their KV keeps only the window. */
  readonly window?: KvWindow;
}

/** `count` positions of a KV tensor from index `offset` (see `KvTensorOps.join`). */
export interface KvPart<T> {
  readonly tensor: T;
  readonly offset: number;
  readonly count: number;
}

export interface LayerKv<T> {
  readonly key: T; // [1, kvHeads, capacity, headDim]
  readonly value: T;
}

/** Positions a pool grows by at least (and rounds its capacity to). */
export const KV_BLOCK_POSITIONS = 256;
/** A windowed layer's room beyond its window less one (compacted when full): small, as attention reads all of it each step. */
export const WINDOW_BLOCK_POSITIONS = 64;

/**
 * The capacity a pool reserves for `needed` positions: `needed` rounded up to a block. Not
 * more: GroupQueryAttention's CPU kernel clears and fills a present buffer as large as the
 * past's capacity on every step, so spare room costs every step, while growing by one block
 * copies the held positions once per 256 steps.
 */
export function poolCapacity(needed: number, current: number): number {
  return Math.max(current, Math.ceil(needed / KV_BLOCK_POSITIONS) * KV_BLOCK_POSITIONS);
}

/** Positions beyond the window less one that a compacted windowed layer keeps, so a short rollback (speculation) needs no re-prefill. */
export const WINDOW_ROLLBACK_SLACK = 32;

/**
 * Most positions a windowed layer holds in replace mode: the window less one plus twice the
 * rollback slack (within the pool's `windowKvPositions`). Every replace step rebuilds the
 * present from the past on the device, so fewer held positions make each step cheaper, while a
 * trim copies only window − 1 + slack positions, once every slack steps.
 */
export function replaceWindowPositions(window: number): number {
  return window - 1 + 2 * WINDOW_ROLLBACK_SLACK;
}

export class KvState<T> {
  private readonly layers = new Map<number, LayerKv<T>>();
  private positions = 0;
  private room = 0;
  private heldBytes = 0;
  private disposed = false;
  /** Windowed layers: positions dropped from the front, and the positions their tensors have room for. */
  private dropped = 0;
  private windowRoom = 0;
  private readonly windowed: ReadonlySet<number>;
  private readonly hasFull: boolean;

  /**
   * `onBytes` hears every change of `bytes` (the delta), so an owner can keep a running total
   * instead of summing its states.
   */
  constructor(
    readonly sessionId: string,
    readonly range: LayerRange,
    private readonly ops: KvTensorOps<T>,
    private onBytes?: (delta: number) => void,
  ) {
    this.windowed = new Set(ops.window?.layers.filter((l) => l >= range.start && l < range.end) ?? []);
    this.hasFull = this.windowed.size < range.end - range.start;
  }

  /** Positions dropped from the front of `layer`'s tensors (0 but for a compacted windowed layer): tensor index i holds position offset + i. */
  offsetOf(layer: number): number {
    return this.windowed.has(layer) ? this.dropped : 0;
  }

  /** Positions `layer`'s tensors have room for. */
  capacityOf(layer: number): number {
    return this.windowed.has(layer) ? this.windowRoom : this.room;
  }

  /** Positions the windowed layers hold (`length` when none is compacted). */
  get windowLength(): number {
    return this.positions - this.dropped;
  }

  /** Hand the byte accounting to another owner (a prefix store adopting a released session's KV). */
  rebind(onBytes: ((delta: number) => void) | undefined): void {
    this.onBytes?.(-this.heldBytes);
    this.onBytes = onBytes;
    this.onBytes?.(this.heldBytes);
  }

  /**
   * Fill this empty state with its own copy of the first `length` positions of `source`
   * (copy on write: `source` is only read). False, changing nothing, when the runtime cannot
   * copy its tensors (KV on the GPU) or `source` holds fewer positions.
   */
  copyFrom(source: KvState<T>, length: number): boolean {
    this.assertLive();
    if (this.layers.size > 0 || length > source.length || length < 1 || source.dropped > 0) return false;
    const capacity = poolCapacity(length + 1, 0);
    if (!this.growLayers(() => ({ capacity, keep: length, offset: 0 }), (layer) => source.past(layer), true)) return false;
    this.room = capacity;
    this.windowRoom = capacity;
    this.positions = length;
    return true;
  }

  /**
   * Fill this empty state with its own copy of positions [0, length) joined from `parts` (in
   * position order; `part.past(layer)`'s tensors from index `offset`, `count` positions each,
   * the counts summing to `length`): a prefix entry kept as a parent and tails. False,
   * changing nothing, when the runtime cannot join its tensors.
   */
  assemble(parts: readonly { past(layer: number): LayerKv<T> | undefined; readonly offset: number; readonly count: number }[], length: number): boolean {
    this.assertLive();
    const join = this.ops.join;
    if (!join || this.layers.size > 0 || length < 1 || parts.reduce((n, p) => n + p.count, 0) !== length) return false;
    const capacity = poolCapacity(length + 1, 0);
    const grown = new Map<number, LayerKv<T>>();
    const undo = () => {
      for (const kv of grown.values()) this.free(kv, false);
      return false;
    };
    for (let layer = this.range.start; layer < this.range.end; layer++) {
      const pasts = parts.map((p) => p.past(layer));
      if (pasts.some((kv) => kv === undefined)) return undo();
      const key = join(parts.map((p, i) => ({ tensor: pasts[i]!.key, offset: p.offset, count: p.count })), capacity);
      const value = key === undefined ? undefined : join(parts.map((p, i) => ({ tensor: pasts[i]!.value, offset: p.offset, count: p.count })), capacity);
      if (key === undefined || value === undefined) {
        if (key !== undefined) this.ops.dispose(key);
        return undo();
      }
      grown.set(layer, { key, value });
    }
    for (const [layer, kv] of grown) this.replace(layer, kv);
    this.room = capacity;
    this.windowRoom = capacity;
    this.positions = length;
    return true;
  }

  /** How this state's runtime measures, copies and frees its tensors. */
  get tensorOps(): KvTensorOps<T> {
    return this.ops;
  }

  /** Number of positions held (the same for every layer). */
  get length(): number {
    return this.positions;
  }

  /** Positions every layer's tensors have room for (0 while empty). */
  get capacity(): number {
    return this.hasFull ? this.room : this.windowRoom;
  }

  get bytes(): number {
    return this.heldBytes;
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  /** The KV tensors of one layer (the first `length` positions are valid), or undefined while the state is empty. */
  past(layer: number): LayerKv<T> | undefined {
    return this.layers.get(layer);
  }

  /**
   * Make room for `total` positions in every layer, keeping the first `length`. Grows in
   * blocks (see `poolCapacity`); a step that fits allocates nothing. Returns false, changing
   * nothing, when the runtime cannot grow its tensors (use `append`).
   */
  reserve(total: number): boolean {
    this.assertLive();
    const empty = this.layers.size === 0;
    const fullGrows = this.hasFull && (empty || total > this.room);
    const windowGrows = this.windowed.size > 0 && (empty || total - this.dropped > this.windowRoom);
    if (!fullGrows && !windowGrows) return true;
    const fullRoom = fullGrows ? poolCapacity(total, this.room) : this.room;
    // Windowed layers: drop what no later query sees (keeping a little slack), then size the room
    // for the step, within the bound unless one step alone needs more.
    const window = this.ops.window?.size ?? 0;
    const dropTo = windowGrows ? Math.max(this.dropped, this.positions - (window - 1 + WINDOW_ROLLBACK_SLACK)) : this.dropped;
    const needed = total - dropTo;
    const bound = windowKvPositions(window, WINDOW_BLOCK_POSITIONS);
    const windowRoom = !windowGrows ? this.windowRoom : needed <= bound ? Math.max(Math.min(bound, poolCapacity(needed, 0)), Math.min(this.windowRoom, bound)) : needed;
    const plan = (layer: number) =>
      this.windowed.has(layer)
        ? windowGrows
          ? { capacity: windowRoom, keep: this.positions - dropTo, offset: dropTo - this.dropped }
          : undefined
        : fullGrows
          ? { capacity: fullRoom, keep: this.positions, offset: 0 }
          : undefined;
    if (!this.growLayers(plan, (layer) => this.layers.get(layer), false)) return false;
    this.room = fullRoom;
    this.windowRoom = windowRoom;
    this.dropped = dropTo;
    return true;
  }

  /**
   * Layers grown as `plan(layer)` says (undefined: left as they are), each keeping `keep`
   * positions of `from(layer)` from `offset` on (a layer `from` lacks starts empty, unless
   * `required`): all installed, or, when the runtime cannot grow a tensor, none (false, what
   * was grown freed).
   */
  private growLayers(
    plan: (layer: number) => { capacity: number; keep: number; offset: number } | undefined,
    from: (layer: number) => LayerKv<T> | undefined,
    required: boolean,
  ): boolean {
    const grown = new Map<number, LayerKv<T>>();
    for (let layer = this.range.start; layer < this.range.end; layer++) {
      const size = plan(layer);
      if (size === undefined) continue;
      const { capacity, keep, offset } = size;
      const old = from(layer);
      const key = old === undefined && required ? undefined : this.ops.grow(old?.key, capacity, keep, offset);
      const value = key === undefined ? undefined : this.ops.grow(old?.value, capacity, keep, offset);
      if (key === undefined || value === undefined) {
        if (key !== undefined) this.ops.dispose(key);
        for (const kv of grown.values()) this.free(kv, false);
        return false;
      }
      grown.set(layer, { key, value });
    }
    for (const [layer, kv] of grown) this.replace(layer, kv);
    return true;
  }

  /** Record that the executor wrote positions up to `total` into the tensors in place. */
  commit(total: number): void {
    this.assertLive();
    const room = Math.min(this.hasFull ? this.room : Infinity, this.windowed.size > 0 ? this.dropped + this.windowRoom : Infinity);
    if (total < this.positions || total > room) throw new RangeError(`commit(${total}) outside [${this.positions}, ${room}]`);
    this.positions = total;
  }

  /**
   * Take ownership of the present KV of every layer in the range, now holding `length`
   * positions in total; the previous tensors are disposed.
   */
  append(present: ReadonlyMap<number, LayerKv<T>>, length: number): void {
    this.assertLive();
    if (length < this.positions) throw new RangeError(`append must not shrink the KV (${this.positions} → ${length})`);
    let room = Infinity;
    let windowRoom = Infinity;
    for (let layer = this.range.start; layer < this.range.end; layer++) {
      const next = present.get(layer);
      if (!next) throw new RangeError(`present KV for layer ${layer} is missing`);
      if (this.windowed.has(layer)) windowRoom = Math.min(windowRoom, this.ops.capacity(next.key));
      else room = Math.min(room, this.ops.capacity(next.key));
    }
    if (this.hasFull && room < length) throw new RangeError(`present KV holds ${room} positions, expected ${length}`);
    // A compacted windowed layer's tensors start at position `dropped`.
    if (this.windowed.size > 0 && windowRoom < length - this.dropped) throw new RangeError(`windowed present KV holds ${windowRoom} positions, expected ${length - this.dropped}`);
    for (let layer = this.range.start; layer < this.range.end; layer++) this.replace(layer, present.get(layer)!);
    this.room = this.hasFull ? room : 0;
    this.windowRoom = this.windowed.size > 0 ? windowRoom : room;
    this.positions = length;
  }

  /**
   * Replace mode: when the windowed layers' tensors hold more than `replaceWindowPositions`, the
   * positions to keep, [from, this.length) (the window less one plus the rollback slack, as the
   * pool keeps), and where they sit in those tensors; else undefined.
   */
  windowTrim(): { from: number; start: number; end: number } | undefined {
    if (this.windowed.size === 0 || this.layers.size === 0) return undefined;
    const window = this.ops.window?.size ?? 0;
    if (this.windowRoom <= replaceWindowPositions(window)) return undefined;
    const from = Math.max(this.dropped, this.positions - (window - 1 + WINDOW_ROLLBACK_SLACK));
    return { from, start: from - this.dropped, end: this.positions - this.dropped };
  }

  /**
   * Install the windowed layers' trimmed tensors (what `windowTrim` said to keep: positions
   * [from, length)); the tensors they replace are disposed.
   */
  compactWindow(trimmed: ReadonlyMap<number, LayerKv<T>>, from: number): void {
    this.assertLive();
    if (from < this.dropped || from > this.positions) throw new RangeError(`compactWindow(${from}) outside [${this.dropped}, ${this.positions}]`);
    const held = this.positions - from;
    for (const layer of this.windowed) {
      const next = trimmed.get(layer);
      if (!next) throw new RangeError(`trimmed KV for layer ${layer} is missing`);
      if (this.ops.capacity(next.key) < held) throw new RangeError(`trimmed KV holds ${this.ops.capacity(next.key)} positions, expected ${held}`);
    }
    for (const layer of this.windowed) this.replace(layer, trimmed.get(layer)!);
    this.dropped = from;
    this.windowRoom = Math.min(...[...this.windowed].map((layer) => this.ops.capacity(trimmed.get(layer)!.key)));
  }

  /** The windowed layers of the range (their KV keeps only the window). */
  get windowedLayers(): readonly number[] {
    return [...this.windowed];
  }

  /** Keep only the first `length` positions: sets the length, never rebuilds (no-op when it holds no more). */
  truncate(length: number): void {
    this.assertLive();
    if (length < 0) throw new RangeError(`truncate(${length})`);
    if (length >= this.positions) return;
    // A windowed layer must still hold what a query at `length` sees; it dropped that: start over.
    if (this.dropped > Math.max(0, length - ((this.ops.window?.size ?? 1) - 1))) this.clear();
    else this.positions = length;
  }

  /** Drop every tensor but stay usable (length 0). */
  clear(): void {
    for (const kv of this.layers.values()) this.free(kv, true);
    this.layers.clear();
    this.positions = 0;
    this.room = 0;
    this.windowRoom = 0;
    this.dropped = 0;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.clear();
  }

  private replace(layer: number, next: LayerKv<T>): void {
    const old = this.layers.get(layer);
    if (old) this.free(old, true);
    this.layers.set(layer, next);
    this.count(this.ops.bytes(next.key) + this.ops.bytes(next.value));
  }

  private count(delta: number): void {
    this.heldBytes += delta;
    this.onBytes?.(delta);
  }

  private free(kv: LayerKv<T>, counted: boolean): void {
    if (counted) this.count(-(this.ops.bytes(kv.key) + this.ops.bytes(kv.value)));
    this.ops.dispose(kv.key);
    this.ops.dispose(kv.value);
  }

  private assertLive(): void {
    if (this.disposed) throw new Error(`KV state of session ${this.sessionId} was disposed`);
  }
}
