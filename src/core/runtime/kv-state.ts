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
 */
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
  grow(tensor: T | undefined, capacity: number, length: number): T | undefined;
  dispose(tensor: T): void;
}

export interface LayerKv<T> {
  readonly key: T; // [1, kvHeads, capacity, headDim]
  readonly value: T;
}

/** Positions a pool grows by at least (and rounds its capacity to). */
export const KV_BLOCK_POSITIONS = 256;

/**
 * The capacity a pool reserves for `needed` positions: `needed` rounded up to a block. Not
 * more: GroupQueryAttention's CPU kernel clears and fills a present buffer as large as the
 * past's capacity on every step, so spare room costs every step, while growing by one block
 * copies the held positions once per 256 steps.
 */
export function poolCapacity(needed: number, current: number): number {
  return Math.max(current, Math.ceil(needed / KV_BLOCK_POSITIONS) * KV_BLOCK_POSITIONS);
}

export class KvState<T> {
  private readonly layers = new Map<number, LayerKv<T>>();
  private positions = 0;
  private room = 0;
  private heldBytes = 0;
  private disposed = false;

  /**
   * `onBytes` hears every change of `bytes` (the delta), so an owner can keep a running total
   * instead of summing its states.
   */
  constructor(
    readonly sessionId: string,
    readonly range: LayerRange,
    private readonly ops: KvTensorOps<T>,
    private onBytes?: (delta: number) => void,
  ) {}

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
    if (this.layers.size > 0 || length > source.length || length < 1) return false;
    if (!this.growLayers(poolCapacity(length + 1, 0), length, (layer) => source.past(layer), true)) return false;
    this.positions = length;
    return true;
  }

  /** Number of positions held (the same for every layer). */
  get length(): number {
    return this.positions;
  }

  /** Positions every layer's tensors have room for (0 while empty). */
  get capacity(): number {
    return this.room;
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
    if (total <= this.room && this.layers.size > 0) return true;
    return this.growLayers(poolCapacity(total, this.room), this.positions, (layer) => this.layers.get(layer), false);
  }

  /**
   * Every layer's K/V grown to `capacity` positions keeping the first `keep` of `from(layer)`
   * (a layer `from` lacks starts empty, unless `required`): all installed, or, when the
   * runtime cannot grow a tensor, none (false, what was grown freed).
   */
  private growLayers(capacity: number, keep: number, from: (layer: number) => LayerKv<T> | undefined, required: boolean): boolean {
    const grown = new Map<number, LayerKv<T>>();
    for (let layer = this.range.start; layer < this.range.end; layer++) {
      const old = from(layer);
      const key = old === undefined && required ? undefined : this.ops.grow(old?.key, capacity, keep);
      const value = key === undefined ? undefined : this.ops.grow(old?.value, capacity, keep);
      if (key === undefined || value === undefined) {
        if (key !== undefined) this.ops.dispose(key);
        for (const kv of grown.values()) this.free(kv, false);
        return false;
      }
      grown.set(layer, { key, value });
    }
    for (const [layer, kv] of grown) this.replace(layer, kv);
    this.room = capacity;
    return true;
  }

  /** Record that the executor wrote positions up to `total` into the tensors in place. */
  commit(total: number): void {
    this.assertLive();
    if (total < this.positions || total > this.room) throw new RangeError(`commit(${total}) outside [${this.positions}, ${this.room}]`);
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
    for (let layer = this.range.start; layer < this.range.end; layer++) {
      const next = present.get(layer);
      if (!next) throw new RangeError(`present KV for layer ${layer} is missing`);
      room = Math.min(room, this.ops.capacity(next.key));
    }
    if (room < length) throw new RangeError(`present KV holds ${room} positions, expected ${length}`);
    for (let layer = this.range.start; layer < this.range.end; layer++) this.replace(layer, present.get(layer)!);
    this.room = room;
    this.positions = length;
  }

  /** Keep only the first `length` positions: sets the length, never rebuilds (no-op when it holds no more). */
  truncate(length: number): void {
    this.assertLive();
    if (length < 0) throw new RangeError(`truncate(${length})`);
    if (length < this.positions) this.positions = length;
  }

  /** Drop every tensor but stay usable (length 0). */
  clear(): void {
    for (const kv of this.layers.values()) this.free(kv, true);
    this.layers.clear();
    this.positions = 0;
    this.room = 0;
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
