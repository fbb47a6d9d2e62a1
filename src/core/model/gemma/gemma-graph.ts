/**
 * The ONNX pieces only Gemma uses, in plain opset-21 ops every runtime has (CPU, wasm,
 * WebGPU): RMSNorm's `(1 + weight)`, the GELU-tanh MLP activation, tanh softcapping of the
 * final logits, and the √hidden embedding scale.
 */
import type { GraphBuilder } from '../onnx/graph-builder.ts';
import type { OnnxTypeCode } from '../onnx/onnx-model.ts';

/** `1 + w` for a Gemma RMSNorm weight (constant-folded by onnxruntime when the session loads). */
export function plusOne(g: GraphBuilder, weight: string, type: OnnxTypeCode): string {
  return g.op1('Add', [weight, g.float([1], type, [])]);
}

/** gelu_pytorch_tanh: 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))). */
export function geluTanh(g: GraphBuilder, x: string, type: OnnxTypeCode): string {
  const cube = g.op1('Mul', [g.op1('Mul', [x, x]), x]);
  const inner = g.op1('Mul', [g.op1('Add', [x, g.op1('Mul', [cube, g.float([0.044715], type, [])])]), g.float([Math.sqrt(2 / Math.PI)], type, [])]);
  const half = g.op1('Mul', [x, g.float([0.5], type, [])]);
  return g.op1('Mul', [half, g.op1('Add', [g.op1('Tanh', [inner]), g.float([1], type, [])])]);
}

/** tanh(x / cap) · cap. */
export function softcap(g: GraphBuilder, x: string, cap: number, type: OnnxTypeCode, output?: string): string {
  const tanh = g.op1('Tanh', [g.op1('Div', [x, g.float([cap], type, [])])]);
  return g.op1('Mul', [tanh, g.float([cap], type, [])], {}, { output });
}

/** The embedding times √hidden, the constant rounded to the activation type as Hugging Face does. */
export function scaleEmbedding(g: GraphBuilder, x: string, hiddenSize: number, type: OnnxTypeCode, output: string): string {
  return g.op1('Mul', [x, g.float([Math.sqrt(hiddenSize)], type, [])], {}, { output });
}
