/**
 * The past KV of a batched run: GroupQueryAttention takes one [B, kvHeads, capacity, headDim]
 * tensor per layer, while each session's pooled KV is its own buffer. Staging copies each
 * entry's valid positions (not its spare capacity) into one tensor. Buffers are reused from
 * run to run (no allocation, no zero-filling per step) and handed out per run, so two runs
 * in flight never share one; what stays idle is at most the last run's set.
 */
import type * as Ort from 'onnxruntime-common';
import type { ActivationDtype } from '../model/activations.ts';
import { KV_BLOCK_POSITIONS } from './kv-state.ts';
import type { OrtModule } from './ort-session.ts';

type FloatArray = Float32Array | Uint16Array;

export interface StagedRun {
  /** The staged past of one layer's key or value for this run's entries. */
  stage(pasts: readonly Ort.Tensor[], starts: readonly number[]): Ort.Tensor;
  /** Give the run's buffers back (after the run settled). */
  done(): void;
}

export class BatchStaging {
  private readonly free: FloatArray[] = [];

  constructor(
    private readonly ort: OrtModule,
    private readonly heads: number,
    private readonly headDim: number,
    private readonly dtype: ActivationDtype,
  ) {}

  /** Bytes held in idle staging buffers. */
  get idleBytes(): number {
    return this.free.reduce((n, b) => n + b.byteLength, 0);
  }

  begin(): StagedRun {
    const taken: FloatArray[] = [];
    return {
      stage: (pasts, starts) => {
        const { heads, headDim } = this;
        const longest = Math.max(...starts);
        const capacity = Math.max(1, Math.ceil(longest / KV_BLOCK_POSITIONS)) * KV_BLOCK_POSITIONS;
        const length = pasts.length * heads * capacity * headDim;
        const buffer = this.take(length);
        taken.push(buffer);
        const view = buffer.subarray(0, length);
        for (let b = 0; b < pasts.length; b++) {
          const data = pasts[b].data as FloatArray;
          const from = pasts[b].dims[2];
          for (let h = 0; h < heads; h++) {
            view.set(data.subarray(h * from * headDim, (h * from + starts[b]) * headDim), (b * heads + h) * capacity * headDim);
          }
        }
        const type = this.dtype === 'fp16' ? 'float16' : 'float32';
        return new this.ort.Tensor(type, view as Float32Array, [pasts.length, heads, capacity, headDim]);
      },
      done: () => {
        // Keep only this run's buffers idle: the next run needs about as many of about this
        // size. Idle buffers from earlier, shorter runs would pile up as contexts grow
        // (outside every KV budget), so they go.
        this.free.length = 0;
        this.free.push(...taken);
        taken.length = 0;
      },
    };
  }

  /** Drop every idle buffer. */
  clear(): void {
    this.free.length = 0;
  }

  private take(length: number): FloatArray {
    const i = this.free.findIndex((b) => b.length >= length);
    if (i >= 0) return this.free.splice(i, 1)[0];
    const size = Math.ceil(length * 1.25);
    return this.dtype === 'fp16' ? new Uint16Array(size) : new Float32Array(size);
  }
}
