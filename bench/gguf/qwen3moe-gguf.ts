/**
 * A Hugging Face Qwen3-MoE checkpoint (Qwen3MoeForCausalLM) as a GGUF file llama.cpp loads,
 * the way llama.cpp's convert_hf_to_gguf.py writes one (`Qwen3MoeModel`, over `Qwen2MoeModel`):
 * architecture `qwen3moe`; metadata `expert_count`, `expert_used_count`,
 * `expert_feed_forward_length` (moe_intermediate_size) beside the llama-style keys; gguf-py's
 * names — router `ffn_gate_inp` [H, E] (ne), experts stacked into 3-D tensors
 * `ffn_gate_exps` / `ffn_up_exps` [H, I, E] and `ffn_down_exps` [I, H, E], q/k norms
 * `attn_q_norm` / `attn_k_norm` — and no q/k permutation (llama.cpp rotates qwen3moe the NeoX
 * way, as Hugging Face does).
 *
 * Types as llama-gguf.ts, except the router: convert_hf_to_gguf keeps `ffn_gate_inp` F32 and
 * llama-quantize never quantizes it (as meshnet keeps the router in the activation dtype).
 * llama.cpp's qwen3moe graph renormalizes the top-k weights always and makes every layer
 * sparse, so checkpoints with `norm_topk_prob: false`, `mlp_only_layers` or a
 * `decoder_sparse_step` other than 1 are refused.
 */
import { openLocalModel } from '../../src/node/local-model.ts';
import type { ModelConfig } from '../../src/core/model/types.ts';
import { moeLayerNames } from '../../src/core/model/moe/moe-names.ts';
import { GGML_BLOCK, GGML_QUANTIZATION_VERSION, GgmlType, type GgmlTypeName, gguf, type GgufValue, LLAMA_FILE_TYPE } from './gguf-format.ts';
import { ggufTokenizerMetadata, readAddBosToken } from './gguf-tokenizer.ts';
import { type GgufTensorPlan, writeGguf } from './gguf-writer.ts';
import { encodeGgml } from './ggml-quantize.ts';
import { llamaCppTensorName, type GgufWeights, type LlamaGgufSummary } from './llama-gguf.ts';

/** Bumped whenever the files this writes change, so cached GGUFs are rebuilt. */
export const QWEN3MOE_GGUF_WRITER_VERSION = 1;

/** HF tensor name → llama.cpp's qwen3moe name for the non-expert tensors (experts are stacked: see writeQwen3MoeGguf). */
export function qwen3MoeTensorName(hf: string): string | undefined {
  const norm = /^model\.layers\.(\d+)\.self_attn\.([qk])_norm\.weight$/.exec(hf);
  if (norm) return `blk.${norm[1]}.attn_${norm[2]}_norm.weight`;
  const router = /^model\.layers\.(\d+)\.mlp\.gate\.weight$/.exec(hf);
  if (router) return `blk.${router[1]}.ffn_gate_inp.weight`;
  return llamaCppTensorName(hf);
}

function refuseUnsupported(config: ModelConfig, dir: string): void {
  const moe = config.moe;
  const why =
    config.architecture !== 'Qwen3MoeForCausalLM' ? `architecture ${config.architecture}`
      : !moe ? 'no MoE block'
        : !moe.normTopK ? 'norm_topk_prob false (llama.cpp qwen3moe always renormalizes)'
          : moe.sparseLayers.length !== config.numLayers ? 'dense layers (mlp_only_layers / decoder_sparse_step; llama.cpp qwen3moe has none)'
            : config.attentionBias ? 'attention biases'
              : undefined;
  if (why) throw new Error(`${dir}: the qwen3moe GGUF writer handles Qwen3MoeForCausalLM checkpoints with every layer sparse; this one has ${why}`);
}

/** Writes `checkpointDir` as a qwen3moe GGUF file of `weights` at `outPath` (atomically). */
export async function writeQwen3MoeGguf(checkpointDir: string, outPath: string, weights: GgufWeights, name = 'meshnet bench model'): Promise<LlamaGgufSummary> {
  const { checkpoint, directory } = await openLocalModel(checkpointDir);
  const config = checkpoint.config;
  refuseUnsupported(config, directory);
  const moe = config.moe!;
  const target = GgmlType[weights];
  const a = 'qwen3moe';
  const metadata = new Map<string, GgufValue>([
    ['general.architecture', gguf.string(a)],
    ['general.type', gguf.string('model')],
    ['general.name', gguf.string(name)],
    ['general.alignment', gguf.u32(32)],
    ['general.file_type', gguf.u32(LLAMA_FILE_TYPE[weights])],
    ['general.quantization_version', gguf.u32(GGML_QUANTIZATION_VERSION)],
    [`${a}.vocab_size`, gguf.u32(config.vocabSize)],
    [`${a}.context_length`, gguf.u32(config.maxPositionEmbeddings)],
    [`${a}.embedding_length`, gguf.u32(config.hiddenSize)],
    [`${a}.block_count`, gguf.u32(config.numLayers)],
    [`${a}.feed_forward_length`, gguf.u32(config.intermediateSize)],
    [`${a}.attention.head_count`, gguf.u32(config.numHeads)],
    [`${a}.attention.head_count_kv`, gguf.u32(config.numKvHeads)],
    [`${a}.attention.key_length`, gguf.u32(config.headDim)],
    [`${a}.attention.value_length`, gguf.u32(config.headDim)],
    [`${a}.rope.dimension_count`, gguf.u32(config.headDim)],
    [`${a}.rope.freq_base`, gguf.f32(config.rope.theta)],
    [`${a}.attention.layer_norm_rms_epsilon`, gguf.f32(config.rmsNormEps)],
    [`${a}.expert_count`, gguf.u32(moe.numExperts)],
    [`${a}.expert_used_count`, gguf.u32(moe.topK)],
    [`${a}.expert_feed_forward_length`, gguf.u32(moe.expertIntermediateSize)],
  ]);
  const tokenizer = await ggufTokenizerMetadata(directory, config.vocabSize, {
    bosTokenId: config.bosTokenId,
    eosTokenId: config.eosTokenIds[0],
    addBosToken: await readAddBosToken(directory),
  });
  for (const [key, value] of tokenizer) metadata.set(key, value);

  const H = config.hiddenSize;
  const I = moe.expertIntermediateSize;
  const E = moe.numExperts;
  const fallbacks: string[] = [];
  const plans: (GgufTensorPlan & { source: string })[] = [];
  const typeFor = (ggufName: string, ne: readonly number[]) => {
    let type = ne.length === 1 || ggufName.endsWith('ffn_gate_inp.weight') ? GgmlType.F32 : target;
    if (ne[0] % GGML_BLOCK[type].values !== 0) {
      fallbacks.push(`${ggufName} (${ne[0]} values per row) as F16`);
      type = GgmlType.F16;
    }
    return type;
  };
  const expertTensors = new Set<string>();
  for (let l = 0; l < config.numLayers; l++) {
    const names = moeLayerNames(config, l)!;
    for (const part of ['gate', 'up', 'down'] as const) {
      const sources = names.experts.map((n) => n[part]);
      for (const s of sources) expertTensors.add(s);
      const ggufName = `blk.${l}.ffn_${part}_exps.weight`;
      const ne = part === 'down' ? [I, H, E] : [H, I, E];
      const type = typeFor(ggufName, ne);
      plans.push({
        name: ggufName,
        source: `${sources[0]} … ${sources.at(-1)}`,
        ne,
        type,
        async data() {
          // Expert e's [out, in] matrix is ne [in, out]; stacking them makes the outermost dimension the expert.
          const parts: Uint8Array[] = [];
          for (const s of sources) parts.push(encodeGgml(await checkpoint.readTensor(s), type));
          const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
          let at = 0;
          for (const p of parts) out.set(p, at), (at += p.byteLength);
          return out;
        },
      });
    }
  }
  for (const [hf, location] of checkpoint.tensors) {
    if (expertTensors.has(hf)) continue;
    if (hf === 'lm_head.weight' && config.tieWordEmbeddings) continue;
    const ggufName = qwen3MoeTensorName(hf);
    if (ggufName === undefined) throw new Error(`${directory}: tensor '${hf}' has no llama.cpp qwen3moe name`);
    const ne = [...location.shape].reverse();
    const type = typeFor(ggufName, ne);
    plans.push({ name: ggufName, source: hf, ne, type, data: async () => encodeGgml(await checkpoint.readTensor(hf), type) });
  }
  const order = (n: string) => (n === 'token_embd.weight' ? -2 : n.startsWith('blk.') ? Number(n.split('.')[1]) : 1e9);
  plans.sort((x, y) => order(x.name) - order(y.name));
  const written = await writeGguf(outPath, metadata, plans);
  const tensors = written.tensors.map((t, i) => ({ name: t.name, source: plans[i].source, type: GgmlType[t.type] as GgmlTypeName, ne: t.ne, bytes: t.bytes }));
  return { path: outPath, weights, fileBytes: written.bytes, tensors, fallbacks, weightBytesPerToken: moeGgufWeightBytesPerToken(tensors, moe.topK) };
}

/**
 * Weight bytes one decode token reads from a MoE GGUF: every tensor, but only `topK` of each
 * stacked expert tensor's experts (its outermost dimension), and one row of token_embd when
 * output.weight is separate (tied: the LM head reads the whole table).
 */
export function moeGgufWeightBytesPerToken(tensors: readonly { readonly name: string; readonly ne: readonly number[]; readonly bytes: number }[], topK: number): number {
  const untied = tensors.some((t) => t.name === 'output.weight');
  let total = 0;
  for (const t of tensors) {
    if (/_exps\.weight$/.test(t.name)) total += (t.bytes / t.ne[t.ne.length - 1]) * topK;
    else if (t.name === 'token_embd.weight' && untied) total += t.bytes / t.ne[1];
    else total += t.bytes;
  }
  return total;
}
