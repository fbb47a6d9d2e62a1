/**
 * A Hugging Face Llama checkpoint as a GGUF file llama.cpp loads, the way llama.cpp's
 * convert_hf_to_gguf.py writes one (`LlamaModel`): architecture `llama`, its metadata keys
 * and tensor names, and q/k projection rows permuted back from HF's rotate-half rotary
 * layout to Meta's interleaved one (llama.cpp's `llama` architecture rotates adjacent pairs).
 *
 * Types: F32 writes every tensor as F32. F16, Q8_0 and Q4_0 write every 2-D weight in that
 * type — the embedding and the LM head included, like `llama-quantize --pure` — and keep
 * the norms F32. A weight whose rows are not whole 32-value blocks (aidreams260k's and
 * stories260k's down_proj: 172 inputs) falls back to F16, as llama-quantize does, and the
 * summary says so.
 *
 * Streaming: tensors are read from the checkpoint, converted and written one at a time.
 */
import { openLocalModel } from '../../src/node/local-model.ts';
import type { ModelConfig } from '../../src/core/model/types.ts';
import { GGML_BLOCK, GGML_QUANTIZATION_VERSION, GgmlType, type GgmlTypeName, gguf, type GgufValue, LLAMA_FILE_TYPE } from './gguf-format.ts';
import { ggufTokenizerMetadata, readAddBosToken } from './gguf-tokenizer.ts';
import { type GgufTensorPlan, writeGguf } from './gguf-writer.ts';
import { encodeGgml } from './ggml-quantize.ts';

export type GgufWeights = 'F32' | 'F16' | 'Q8_0' | 'Q4_0';
export const GGUF_WEIGHTS: readonly GgufWeights[] = ['F32', 'F16', 'Q8_0', 'Q4_0'];

/** Bumped whenever the files this writes change, so cached GGUFs are rebuilt. */
export const LLAMA_GGUF_WRITER_VERSION = 1;

export interface LlamaGgufSummary {
  readonly path: string;
  readonly weights: GgufWeights;
  readonly fileBytes: number;
  readonly tensors: readonly { readonly name: string; readonly source: string; readonly type: GgmlTypeName; readonly ne: readonly number[]; readonly bytes: number }[];
  /** Tensors written in another type than asked (rows not whole blocks). */
  readonly fallbacks: readonly string[];
  /** Weight bytes a decode step reads: every matrix once, one embedding row (the LM head reads the whole table when tied). */
  readonly weightBytesPerToken: number;
}

/** HF tensor name → llama.cpp's (gguf-py tensor_mapping), or undefined for a tensor llama.cpp's llama has no use for. */
export function llamaCppTensorName(hf: string): string | undefined {
  const fixed: Record<string, string> = { 'model.embed_tokens.weight': 'token_embd.weight', 'model.norm.weight': 'output_norm.weight', 'lm_head.weight': 'output.weight' };
  if (fixed[hf]) return fixed[hf];
  const layer = /^model\.layers\.(\d+)\.(.+)\.weight$/.exec(hf);
  if (!layer) return undefined;
  const part: Record<string, string> = {
    input_layernorm: 'attn_norm',
    'self_attn.q_proj': 'attn_q',
    'self_attn.k_proj': 'attn_k',
    'self_attn.v_proj': 'attn_v',
    'self_attn.o_proj': 'attn_output',
    post_attention_layernorm: 'ffn_norm',
    'mlp.gate_proj': 'ffn_gate',
    'mlp.up_proj': 'ffn_up',
    'mlp.down_proj': 'ffn_down',
  };
  return part[layer[2]] === undefined ? undefined : `blk.${layer[1]}.${part[layer[2]]}.weight`;
}

/**
 * convert_hf_to_gguf.py `LlamaModel.permute`: rows `[heads, 2, headDim/2]` → `[heads, headDim/2, 2]`,
 * i.e. HF row h·D + s·D/2 + i becomes row h·D + 2i + s. Weight `[rows, cols]`, row-major.
 */
export function permuteRotaryRows(weight: Float32Array, rows: number, cols: number, heads: number): Float32Array {
  const headDim = rows / heads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) throw new RangeError(`cannot permute ${rows} rows into ${heads} heads of an even size`);
  const half = headDim / 2;
  const out = new Float32Array(weight.length);
  for (let h = 0; h < heads; h++) {
    for (let s = 0; s < 2; s++) {
      for (let i = 0; i < half; i++) {
        const from = (h * headDim + s * half + i) * cols;
        out.set(weight.subarray(from, from + cols), (h * headDim + 2 * i + s) * cols);
      }
    }
  }
  return out;
}

function refuseUnsupported(config: ModelConfig, dir: string) {
  const why =
    config.architecture !== 'LlamaForCausalLM' ? `architecture ${config.architecture}`
      : config.rope.llama3 ? 'llama3 rope scaling (needs rope_freqs.weight)'
        : config.attentionBias ? 'attention biases'
          : config.qkNorm ? 'q/k norms'
            : undefined;
  if (why) throw new Error(`${dir}: the GGUF writer handles plain LlamaForCausalLM checkpoints; this one has ${why}`);
}

/** Writes `checkpointDir` as a GGUF file of `weights` at `outPath` (atomically: written beside it, then renamed). */
export async function writeLlamaGguf(checkpointDir: string, outPath: string, weights: GgufWeights, name = 'meshnet bench model'): Promise<LlamaGgufSummary> {
  const { checkpoint, directory } = await openLocalModel(checkpointDir);
  const config = checkpoint.config;
  refuseUnsupported(config, directory);
  const target = GgmlType[weights];
  const metadata = new Map<string, GgufValue>([
    ['general.architecture', gguf.string('llama')],
    ['general.type', gguf.string('model')],
    ['general.name', gguf.string(name)],
    ['general.alignment', gguf.u32(32)],
    ['general.file_type', gguf.u32(LLAMA_FILE_TYPE[weights])],
    ['general.quantization_version', gguf.u32(GGML_QUANTIZATION_VERSION)],
    ['llama.vocab_size', gguf.u32(config.vocabSize)],
    ['llama.context_length', gguf.u32(config.maxPositionEmbeddings)],
    ['llama.embedding_length', gguf.u32(config.hiddenSize)],
    ['llama.block_count', gguf.u32(config.numLayers)],
    ['llama.feed_forward_length', gguf.u32(config.intermediateSize)],
    ['llama.attention.head_count', gguf.u32(config.numHeads)],
    ['llama.attention.head_count_kv', gguf.u32(config.numKvHeads)],
    ['llama.attention.key_length', gguf.u32(config.headDim)],
    ['llama.attention.value_length', gguf.u32(config.headDim)],
    ['llama.rope.dimension_count', gguf.u32(config.headDim)],
    ['llama.rope.freq_base', gguf.f32(config.rope.theta)],
    ['llama.attention.layer_norm_rms_epsilon', gguf.f32(config.rmsNormEps)],
  ]);
  const tokenizer = await ggufTokenizerMetadata(directory, config.vocabSize, {
    bosTokenId: config.bosTokenId,
    eosTokenId: config.eosTokenIds[0],
    addBosToken: await readAddBosToken(directory),
  });
  for (const [key, value] of tokenizer) metadata.set(key, value);

  const fallbacks: string[] = [];
  const plans: (GgufTensorPlan & { source: string })[] = [];
  for (const [hf, location] of checkpoint.tensors) {
    if (hf === 'lm_head.weight' && config.tieWordEmbeddings) continue;
    const ggufName = llamaCppTensorName(hf);
    if (ggufName === undefined) throw new Error(`${directory}: tensor '${hf}' has no llama.cpp name`);
    const ne = [...location.shape].reverse();
    let type = ne.length === 1 ? GgmlType.F32 : target;
    if (ne[0] % GGML_BLOCK[type].values !== 0) {
      fallbacks.push(`${ggufName} (${ne[0]} values per row) as F16`);
      type = GgmlType.F16;
    }
    const permuteHeads = /attn_q\.weight$/.test(ggufName) ? config.numHeads : /attn_k\.weight$/.test(ggufName) ? config.numKvHeads : 0;
    plans.push({
      name: ggufName,
      source: hf,
      ne,
      type,
      async data() {
        let values = await checkpoint.readTensor(hf); // [out, in] row-major
        if (permuteHeads) values = permuteRotaryRows(values, location.shape[0], location.shape[1], permuteHeads);
        return encodeGgml(values, type);
      },
    });
  }
  const order = (n: string) => (n === 'token_embd.weight' ? -2 : n.startsWith('blk.') ? Number(n.split('.')[1]) : 1e9);
  plans.sort((a, b) => order(a.name) - order(b.name));
  const written = await writeGguf(outPath, metadata, plans);
  const tensors = written.tensors.map((t, i) => ({ name: t.name, source: plans[i].source, type: GgmlType[t.type] as GgmlTypeName, ne: t.ne, bytes: t.bytes }));
  return { path: outPath, weights, fileBytes: written.bytes, tensors, fallbacks, weightBytesPerToken: ggufWeightBytesPerToken(tensors) };
}

/** Weight bytes a decode step reads from a llama GGUF's tensors: all of them, but only one row of token_embd when output.weight is separate. */
export function ggufWeightBytesPerToken(tensors: readonly { readonly name: string; readonly ne: readonly number[]; readonly bytes: number }[]): number {
  const total = tensors.reduce((s, t) => s + t.bytes, 0);
  const embedding = tensors.find((t) => t.name === 'token_embd.weight');
  const untied = tensors.some((t) => t.name === 'output.weight');
  return untied && embedding ? total - embedding.bytes + embedding.bytes / embedding.ne[1] : total;
}
