/**
 * How a graph holds a linear weight or an embedding table, and the ops that use it:
 *
 *   float    Gemm(x [rows, K], W [N, K], b) with transB = 1 (Hugging Face's [out, in] in place);
 *            a Cast first when the weight is stored in another float type than the activations
 *   nbits    MatMulNBits(x, data, scales, zeroPoints?, —, bias) (com.microsoft), after a Gather
 *            of x's columns when the weight's K order is permuted (GPTQ act-order, see
 *            quant/prequantized.ts); onnxruntime 1.30's own g_idx input is not used: it gave
 *            wrong results on CPU and wasm and is refused by WebGPU (checked by hand)
 *   block    GatherBlockQuantized(data, ids, scales, zeroPoints?) for embeddings
 */
import type { GraphBuilder } from './graph-builder.ts';
import type { Initializer, OnnxTypeCode } from './onnx-model.ts';

export type LinearWeight =
  | { readonly kind: 'float'; readonly weight: Initializer; readonly castTo?: OnnxTypeCode }
  | {
      readonly kind: 'nbits';
      readonly data: Initializer; // uint8 [N, kBlocks, blockSize · bits / 8]
      readonly scales: Initializer; // [N · kBlocks]
      readonly zeroPoints?: Initializer; // uint8 [N · ceil(kBlocks · bits / 8)]
      /** Input column order: x' = x[:, permutation] (int64 [K]). */
      readonly permutation?: Initializer;
      readonly K: number;
      readonly N: number;
      readonly bits: 4 | 8;
      readonly blockSize: number;
      readonly accuracyLevel: number;
    };

export type EmbeddingWeight =
  | { readonly kind: 'float'; readonly weight: Initializer; readonly castTo?: OnnxTypeCode }
  | {
      readonly kind: 'block';
      readonly data: Initializer; // uint8 [vocab, H · bits / 8]
      readonly scales: Initializer; // [vocab, kBlocks]
      readonly zeroPoints?: Initializer; // uint8 [vocab, ceil(kBlocks · bits / 8)]
      readonly bits: 4 | 8;
      readonly blockSize: number;
    };

/** y = x Wᵀ (+ bias): Gemm takes x 2-D [rows, K], MatMulNBits any rank [..., K]; gives [..., N]. Registers the weight's initializers on `g`. */
export function emitLinear(g: GraphBuilder, x: string, weight: LinearWeight, bias?: string): string {
  if (weight.kind === 'float') {
    const w = g.initializer(weight.weight);
    const matrix = weight.castTo === undefined ? w : g.op1('Cast', [w], { to: weight.castTo });
    return g.op1('Gemm', bias ? [x, matrix, bias] : [x, matrix], { transB: 1 });
  }
  const input = weight.permutation ? g.op1('Gather', [x, g.initializer(weight.permutation)], { axis: -1 }) : x; // the last axis: K
  const inputs = [input, g.initializer(weight.data), g.initializer(weight.scales), weight.zeroPoints ? g.initializer(weight.zeroPoints) : ''];
  if (bias) inputs.push('', bias); // input 4 (g_idx) stays empty
  while (inputs.at(-1) === '') inputs.pop();
  return g.op1('MatMulNBits', inputs, { K: weight.K, N: weight.N, bits: weight.bits, block_size: weight.blockSize, accuracy_level: weight.accuracyLevel }, { domain: 'com.microsoft' });
}

/** Rows of the table for `ids` ([1, seq] int64 → [1, seq, H]). */
export function emitEmbedding(g: GraphBuilder, ids: string, weight: EmbeddingWeight, output: string): string {
  if (weight.kind === 'float') {
    const table = g.initializer(weight.weight);
    if (weight.castTo === undefined) return g.op1('Gather', [table, ids], { axis: 0 }, { output });
    return g.op1('Cast', [g.op1('Gather', [table, ids], { axis: 0 })], { to: weight.castTo }, { output });
  }
  const inputs = [g.initializer(weight.data), ids, g.initializer(weight.scales)];
  if (weight.zeroPoints) inputs.push(g.initializer(weight.zeroPoints));
  return g.op1('GatherBlockQuantized', inputs, { gather_axis: 0, quantize_axis: 1, block_size: weight.blockSize, bits: weight.bits }, { domain: 'com.microsoft', output });
}
