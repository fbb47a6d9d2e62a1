/**
 * A KV segment: positions [from, to) of one session's KV on one layer range, copied into
 * tensors of their own (index 0 holds position `from`, exactly `to - from` positions, no spare
 * room). A prefix entry that shares its first positions with a parent entry keeps only its
 * tail as a segment (prefix-store.ts); a segment is never written.
 */
import type { LayerRange } from '../model/types.ts';
import type { KvState, KvTensorOps, LayerKv } from './kv-state.ts';

export class KvSegment<T> {
  private disposed = false;

  private constructor(
    readonly range: LayerRange,
    readonly from: number,
    readonly to: number,
    private readonly layers: ReadonlyMap<number, LayerKv<T>>,
    private readonly ops: KvTensorOps<T>,
    readonly bytes: number,
  ) {}

  /**
   * Positions [from, to) of `state` as a segment (`state` is only read), or undefined when its
   * runtime cannot copy and later join its tensors (KV on the GPU), a windowed layer no longer
   * holds `from`, or the state holds fewer than `to` positions.
   */
  static cut<T>(state: KvState<T>, from: number, to: number): KvSegment<T> | undefined {
    const ops = state.tensorOps;
    if (!ops.join || from < 0 || to <= from || to > state.length || state.windowLength !== state.length) return undefined;
    const layers = new Map<number, LayerKv<T>>();
    let bytes = 0;
    const undo = () => {
      for (const kv of layers.values()) (ops.dispose(kv.key), ops.dispose(kv.value));
      return undefined;
    };
    for (let layer = state.range.start; layer < state.range.end; layer++) {
      const past = state.past(layer);
      if (!past) return undo();
      const key = ops.grow(past.key, to - from, to - from, from);
      const value = key === undefined ? undefined : ops.grow(past.value, to - from, to - from, from);
      if (key === undefined || value === undefined) {
        if (key !== undefined) ops.dispose(key);
        return undo();
      }
      layers.set(layer, { key, value });
      bytes += ops.bytes(key) + ops.bytes(value);
    }
    return new KvSegment(state.range, from, to, layers, ops, bytes);
  }

  get length(): number {
    return this.to - this.from;
  }

  /** The tensors of one layer (index i holds position from + i). */
  past(layer: number): LayerKv<T> | undefined {
    return this.disposed ? undefined : this.layers.get(layer);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const kv of this.layers.values()) (this.ops.dispose(kv.key), this.ops.dispose(kv.value));
  }
}
