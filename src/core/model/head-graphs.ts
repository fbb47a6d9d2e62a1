/**
 * The head's two small graphs.
 *
 * Embedding graph:  input_ids [1, seq] int64          → hidden_states [1, seq, H]
 * Head graph:       hidden_states [1, seq, H],        → logits [n, vocab] float32
 *                   logit_positions [n] int64            (final RMSNorm and LM head of the
 *                                                        positions asked for: the last one
 *                                                        for a plain step, every verified one
 *                                                        for a speculative step)
 *                   (several sessions' rows at once: their positions side by side
 *                   as one sequence, see OrtHeadRunner.logitsBatch)
 *
 * The embedding is a Gather (float formats) or GatherBlockQuantized (q8/q4); the LM head is a
 * linear like the layers' (Gemm or MatMulNBits). A tied model quantizes the one table twice,
 * once per graph (the two ops want different layouts when the hidden size is not a multiple
 * of the block size, and the graphs are separate sessions anyway), so each holds its own copy,
 * as the float formats always did.
 */
import { GraphBuilder } from './onnx/graph-builder.ts';
import { emitEmbedding, emitLinear } from './onnx/linear-ops.ts';
import { OnnxType, type OnnxGraph } from './onnx/onnx-model.ts';
import { headTensorNames } from './architectures.ts';
import { onnxType } from './shard-graph.ts';
import type { ActivationDtype } from './activations.ts';
import type { ModelConfig } from './types.ts';
import { plusOne, scaleEmbedding, softcap } from './gemma/gemma-graph.ts';
import type { GraphWeights } from './weight-plan.ts';

export const EMBED_INPUT_IDS = 'input_ids';
export const EMBED_OUTPUT = 'hidden_states';
export const HEAD_INPUT = 'hidden_states';
export const HEAD_INPUT_POSITIONS = 'logit_positions';
export const HEAD_OUTPUT_LOGITS = 'logits';

export function buildEmbeddingGraph(config: ModelConfig, dtype: ActivationDtype, weights: GraphWeights): OnnxGraph {
  const g = new GraphBuilder('embedding');
  const names = headTensorNames(config);
  const ids = g.input(EMBED_INPUT_IDS, OnnxType.INT64, [1, 'sequence']);
  if (config.gemma) scaleEmbedding(g, emitEmbedding(g, ids, weights.embedding(names.embedTokens), 'embedded'), config.hiddenSize, onnxType(dtype), EMBED_OUTPUT);
  else emitEmbedding(g, ids, weights.embedding(names.embedTokens), EMBED_OUTPUT); // table [vocab, H]
  g.output(EMBED_OUTPUT, onnxType(dtype), [1, 'sequence', config.hiddenSize]);
  return g.build();
}

export function buildHeadGraph(config: ModelConfig, dtype: ActivationDtype, weights: GraphWeights): OnnxGraph {
  const g = new GraphBuilder('head');
  const names = headTensorNames(config);
  const hidden = g.input(HEAD_INPUT, onnxType(dtype), [1, 'sequence', config.hiddenSize]);
  const positions = g.input(HEAD_INPUT_POSITIONS, OnnxType.INT64, ['positions']);
  const flat = g.op1('Reshape', [hidden, g.int64([-1, config.hiddenSize])]); // [seq, H]
  const rows = g.op1('Gather', [flat, positions], { axis: 0 }); // [positions, H]
  const finalNorm = g.initializer(weights.tensor(names.finalNorm));
  const normed = g.op1('SimplifiedLayerNormalization', [rows, config.gemma ? plusOne(g, finalNorm, onnxType(dtype)) : finalNorm], {
    axis: -1,
    epsilon: config.rmsNormEps,
    stash_type: 1,
  });
  const logits = emitLinear(g, normed, weights.linear(names.lmHead)); // [positions, vocab]
  const cap = config.gemma?.finalLogitSoftcap;
  const float = dtype === 'fp16' ? g.op1('Cast', [logits], { to: OnnxType.FLOAT }, cap === undefined ? { output: HEAD_OUTPUT_LOGITS } : {}) : logits;
  if (cap !== undefined) softcap(g, float, cap, OnnxType.FLOAT, HEAD_OUTPUT_LOGITS);
  else if (dtype !== 'fp16') g.op1('Identity', [logits], {}, { output: HEAD_OUTPUT_LOGITS });
  g.output(HEAD_OUTPUT_LOGITS, OnnxType.FLOAT, ['positions', config.vocabSize]);
  return g.build();
}
