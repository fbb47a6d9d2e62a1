/**
 * The KV trim graph: one layer's key and value [1, kvHeads, positions, headDim] sliced to the
 * positions [start, end) along the sequence axis (two Slice nodes). Executors whose KV lives on
 * the GPU run it to drop what a sliding-window layer no longer sees (the JS API cannot copy
 * part of a GPU buffer), so the copy stays on the device: inputs and outputs are gpu-buffer
 * tensors there. Plain ONNX (opset 21) every provider runs.
 */
import type { ActivationDtype } from './activations.ts';
import { GraphBuilder } from './onnx/graph-builder.ts';
import { OnnxType, serializeModel } from './onnx/onnx-model.ts';

export const KV_TRIM_KEY = 'key';
export const KV_TRIM_VALUE = 'value';
export const KV_TRIM_START = 'start'; // [1] int64
export const KV_TRIM_END = 'end'; // [1] int64
export const KV_TRIM_KEPT_KEY = 'kept_key';
export const KV_TRIM_KEPT_VALUE = 'kept_value';

export function buildKvTrimGraph(dtype: ActivationDtype): Uint8Array {
  const g = new GraphBuilder('kv_trim');
  const type = dtype === 'fp16' ? OnnxType.FLOAT16 : OnnxType.FLOAT;
  const shape = [1, 'kv_heads', 'positions', 'head_dim'];
  g.input(KV_TRIM_KEY, type, shape);
  g.input(KV_TRIM_VALUE, type, shape);
  g.input(KV_TRIM_START, OnnxType.INT64, [1]);
  g.input(KV_TRIM_END, OnnxType.INT64, [1]);
  const axes = g.int64([2]);
  g.op1('Slice', [KV_TRIM_KEY, KV_TRIM_START, KV_TRIM_END, axes], {}, { output: KV_TRIM_KEPT_KEY });
  g.op1('Slice', [KV_TRIM_VALUE, KV_TRIM_START, KV_TRIM_END, axes], {}, { output: KV_TRIM_KEPT_VALUE });
  const kept = [1, 'kv_heads', 'kept', 'head_dim'];
  g.output(KV_TRIM_KEPT_KEY, type, kept);
  g.output(KV_TRIM_KEPT_VALUE, type, kept);
  return serializeModel(g.build());
}
