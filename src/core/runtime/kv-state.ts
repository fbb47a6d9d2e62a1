/**
 * Hot KV State: the KV cache of one session on one shard. It owns its tensors: the executor
 * reads the past through `past(layer)` and hands the new present tensors to `append`, which
 * disposes the replaced ones. `dispose` frees everything exactly once.
 */
import type { LayerRange } from '../model/types.ts';

/** How a runtime measures, trims and frees its tensor type (ORT tensors, GPU buffers, …). */
export interface KvTensorOps<T> {
  /** Bytes held by the tensor. */
  bytes(tensor: T): number;
  /**
   * A new tensor holding the first `length` positions of a [1, kvHeads, positions, headDim]
   * tensor, or undefined when this runtime cannot trim it (e.g. KV held on the GPU).
   */
  truncate(tensor: T, length: number): T | undefined;
  dispose(tensor: T): void;
}

export interface LayerKv<T> {
  readonly key: T; // [1, kvHeads, length, headDim]
  readonly value: T;
}

export class KvState<T> {
  private readonly layers = new Map<number, LayerKv<T>>();
  private positions = 0;
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
    private readonly onBytes?: (delta: number) => void,
  ) {}

  /** Number of positions held (the same for every layer). */
  get length(): number {
    return this.positions;
  }

  get bytes(): number {
    return this.heldBytes;
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  /** The past KV of one layer, or undefined while the state is empty. */
  past(layer: number): LayerKv<T> | undefined {
    return this.layers.get(layer);
  }

  /**
   * Take ownership of the present KV of every layer in the range, now holding `length`
   * positions in total; the previous tensors are disposed.
   */
  append(present: ReadonlyMap<number, LayerKv<T>>, length: number): void {
    this.assertLive();
    if (length < this.positions) throw new RangeError(`append must not shrink the KV (${this.positions} → ${length})`);
    for (let layer = this.range.start; layer < this.range.end; layer++) {
      const next = present.get(layer);
      if (!next) throw new RangeError(`present KV for layer ${layer} is missing`);
      this.replace(layer, next);
    }
    this.positions = length;
  }

  /**
   * Keep only the first `length` positions. Where the runtime cannot trim its tensors the
   * state is emptied instead, and the next step becomes a cache miss that rebuilds it.
   */
  truncate(length: number): void {
    this.assertLive();
    if (length >= this.positions) return;
    for (const [layer, kv] of [...this.layers]) {
      const key = this.ops.truncate(kv.key, length);
      const value = key === undefined ? undefined : this.ops.truncate(kv.value, length);
      if (key === undefined || value === undefined) {
        if (key !== undefined) this.ops.dispose(key);
        this.clear();
        return;
      }
      this.replace(layer, { key, value });
    }
    this.positions = length;
  }

  /** Drop every tensor but stay usable (length 0). */
  clear(): void {
    for (const kv of this.layers.values()) this.free(kv);
    this.layers.clear();
    this.positions = 0;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.clear();
  }

  private replace(layer: number, next: LayerKv<T>): void {
    const old = this.layers.get(layer);
    if (old) this.free(old);
    this.layers.set(layer, next);
    this.count(this.ops.bytes(next.key) + this.ops.bytes(next.value));
  }

  private count(delta: number): void {
    this.heldBytes += delta;
    this.onBytes?.(delta);
  }

  private free(kv: LayerKv<T>): void {
    this.count(-(this.ops.bytes(kv.key) + this.ops.bytes(kv.value)));
    this.ops.dispose(kv.key);
    this.ops.dispose(kv.value);
  }

  private assertLive(): void {
    if (this.disposed) throw new Error(`KV state of session ${this.sessionId} was disposed`);
  }
}
