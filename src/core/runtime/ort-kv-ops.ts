/**
 * KV tensor operations on onnxruntime tensors (grow, trim, join, dispose), for the shard
 * executor's pooled and replaced KV; growing and joining work on CPU-resident tensors only.
 */
import type * as Ort from 'onnxruntime-common';
import type { ActivationDtype } from '../model/activations.ts';
import type { KvWindow } from '../model/layer-attention.ts';
import type { ModelConfig } from '../model/types.ts';
import type { KvTensorOps } from './kv-state.ts';
import type { OrtModule } from './ort-session.ts';

type Tensor = Ort.Tensor;
type FloatArray = Float32Array | Uint16Array;

export type KvShape = Pick<ModelConfig, 'numKvHeads' | 'headDim'>;

/** KV tensor operations for ORT tensors; growing works on CPU-resident tensors only. */
export function ortKvOps(ort: OrtModule, shape: KvShape, dtype: ActivationDtype, window?: KvWindow): KvTensorOps<Tensor> {
  const type = dtype === 'fp16' ? 'float16' : 'float32';
  const { numKvHeads: heads, headDim } = shape;
  return {
    ...(window ? { window } : {}),
    bytes: (t) => t.dims.reduce((a, b) => a * b, 1) * (t.type === 'float16' ? 2 : 4),
    capacity: (t) => t.dims[2],
    grow: (t, capacity, length, offset = 0) => {
      if (t !== undefined && t.location !== 'cpu') return undefined; // GPU-resident KV: replaced, never grown here
      const out = dtype === 'fp16' ? new Uint16Array(heads * capacity * headDim) : new Float32Array(heads * capacity * headDim);
      if (t !== undefined && length > 0) {
        const data = t.data as FloatArray;
        const from = t.dims[2];
        for (let h = 0; h < heads; h++) out.set(data.subarray((h * from + offset) * headDim, (h * from + offset + length) * headDim), h * capacity * headDim);
      }
      return new ort.Tensor(type, out as Float32Array, [1, heads, capacity, headDim]);
    },
    join: (parts, capacity) => {
      if (parts.some((p) => p.tensor.location !== 'cpu')) return undefined; // GPU-resident KV: cannot be joined here
      const out = dtype === 'fp16' ? new Uint16Array(heads * capacity * headDim) : new Float32Array(heads * capacity * headDim);
      for (let h = 0; h < heads; h++) {
        let at = 0;
        for (const { tensor, offset, count } of parts) {
          const data = tensor.data as FloatArray;
          const from = tensor.dims[2];
          out.set(data.subarray((h * from + offset) * headDim, (h * from + offset + count) * headDim), (h * capacity + at) * headDim);
          at += count;
        }
      }
      return new ort.Tensor(type, out as Float32Array, [1, heads, capacity, headDim]);
    },
    dispose: (t) => {
      if (t.location === 'gpu-buffer') t.dispose();
    },
  };
}
