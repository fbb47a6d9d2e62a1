/**
 * The head's two small graphs.
 *
 * Embedding graph:  input_ids [1, seq] int64          → hidden_states [1, seq, H]
 * Head graph:       hidden_states [B, seq, H]         → logits [B, vocab] float32
 *                   (final RMSNorm and LM head, last position only; B > 1 is several
 *                   sessions' last positions at once, one row each)
 */
import { GraphBuilder } from './onnx/graph-builder.ts';
import { OnnxType, type OnnxGraph } from './onnx/onnx-model.ts';
import { headTensorNames } from './architectures.ts';
import { onnxType, type ActivationDtype, type WeightResolver } from './shard-graph.ts';
import type { ModelConfig } from './types.ts';

export const EMBED_INPUT_IDS = 'input_ids';
export const EMBED_OUTPUT = 'hidden_states';
export const HEAD_INPUT = 'hidden_states';
export const HEAD_OUTPUT_LOGITS = 'logits';

export function buildEmbeddingGraph(config: ModelConfig, dtype: ActivationDtype, weight: WeightResolver): OnnxGraph {
  const g = new GraphBuilder('embedding');
  const names = headTensorNames(config);
  const ids = g.input(EMBED_INPUT_IDS, OnnxType.INT64, [1, 'sequence']);
  const table = g.initializer(weight(names.embedTokens)); // [vocab, H]
  g.op1('Gather', [table, ids], { axis: 0 }, { output: EMBED_OUTPUT });
  g.output(EMBED_OUTPUT, onnxType(dtype), [1, 'sequence', config.hiddenSize]);
  return g.build();
}

export function buildHeadGraph(config: ModelConfig, dtype: ActivationDtype, weight: WeightResolver): OnnxGraph {
  const g = new GraphBuilder('head');
  const names = headTensorNames(config);
  const hidden = g.input(HEAD_INPUT, onnxType(dtype), ['batch', 'sequence', config.hiddenSize]);
  const last = g.op1('Gather', [hidden, g.int64([-1], [])], { axis: 1 }); // [B, H]
  const normed = g.op1('SimplifiedLayerNormalization', [last, g.initializer(weight(names.finalNorm))], {
    axis: -1,
    epsilon: config.rmsNormEps,
    stash_type: 1,
  });
  const logits = g.op1('Gemm', [normed, g.initializer(weight(names.lmHead))], { transB: 1 }); // [B, vocab]
  if (dtype === 'fp16') g.op1('Cast', [logits], { to: OnnxType.FLOAT }, { output: HEAD_OUTPUT_LOGITS });
  else g.op1('Identity', [logits], {}, { output: HEAD_OUTPUT_LOGITS });
  g.output(HEAD_OUTPUT_LOGITS, OnnxType.FLOAT, ['batch', config.vocabSize]);
  return g.build();
}
