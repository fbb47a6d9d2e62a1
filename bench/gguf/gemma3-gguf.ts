/**
 * A Hugging Face Gemma 3 text checkpoint (Gemma3ForCausalLM) as a GGUF file llama.cpp loads,
 * the way llama.cpp's convert_hf_to_gguf.py writes one (`Gemma3Model`): architecture `gemma3`,
 * its metadata keys (head size, sliding window, rope base of the global layers; llama.cpp
 * fixes the local layers' base at 10,000 and the five-local-to-one-global pattern), gguf-py's
 * tensor names (sandwich norms as `post_attention_norm`, `ffn_norm`, `post_ffw_norm`), and
 * every norm weight shifted by +1 (Gemma's RMSNorm multiplies by 1 + w; llama.cpp's by w). No
 * q/k permutation: llama.cpp rotates Gemma the NeoX way, as Hugging Face does. Types and
 * fallbacks as llama-gguf.ts.
 */
import { openLocalModel } from '../../src/node/local-model.ts';
import type { ModelConfig } from '../../src/core/model/types.ts';
import { GGML_BLOCK, GGML_QUANTIZATION_VERSION, GgmlType, type GgmlTypeName, gguf, type GgufValue, LLAMA_FILE_TYPE } from './gguf-format.ts';
import { ggufTokenizerMetadata, readAddBosToken } from './gguf-tokenizer.ts';
import { type GgufTensorPlan, writeGguf } from './gguf-writer.ts';
import { encodeGgml } from './ggml-quantize.ts';
import { ggufWeightBytesPerToken, type GgufWeights, type LlamaGgufSummary } from './llama-gguf.ts';

/** Bumped whenever the files this writes change, so cached GGUFs are rebuilt. */
export const GEMMA3_GGUF_WRITER_VERSION = 1;

/** HF tensor name → llama.cpp's gemma3 name (gguf-py tensor_mapping), or undefined. */
export function gemma3TensorName(hf: string): string | undefined {
  const fixed: Record<string, string> = { 'model.embed_tokens.weight': 'token_embd.weight', 'model.norm.weight': 'output_norm.weight' };
  if (fixed[hf]) return fixed[hf];
  const layer = /^model\.layers\.(\d+)\.(.+)\.weight$/.exec(hf);
  if (!layer) return undefined;
  const part: Record<string, string> = {
    input_layernorm: 'attn_norm',
    'self_attn.q_proj': 'attn_q',
    'self_attn.k_proj': 'attn_k',
    'self_attn.v_proj': 'attn_v',
    'self_attn.o_proj': 'attn_output',
    'self_attn.q_norm': 'attn_q_norm',
    'self_attn.k_norm': 'attn_k_norm',
    post_attention_layernorm: 'post_attention_norm',
    pre_feedforward_layernorm: 'ffn_norm',
    post_feedforward_layernorm: 'post_ffw_norm',
    'mlp.gate_proj': 'ffn_gate',
    'mlp.up_proj': 'ffn_up',
    'mlp.down_proj': 'ffn_down',
  };
  return part[layer[2]] === undefined ? undefined : `blk.${layer[1]}.${part[layer[2]]}.weight`;
}

function refuseUnsupported(config: ModelConfig, dir: string): void {
  const why =
    config.architecture !== 'Gemma3ForCausalLM' ? `architecture ${config.architecture}`
      : !config.tieWordEmbeddings ? 'an untied LM head'
        : config.attentionBias ? 'attention biases'
          : undefined;
  if (why) throw new Error(`${dir}: the Gemma 3 GGUF writer handles tied Gemma3ForCausalLM checkpoints; this one has ${why}`);
}

/** Writes `checkpointDir` as a gemma3 GGUF file of `weights` at `outPath` (atomically). */
export async function writeGemma3Gguf(checkpointDir: string, outPath: string, weights: GgufWeights, name = 'meshnet bench model'): Promise<LlamaGgufSummary> {
  const { checkpoint, directory } = await openLocalModel(checkpointDir);
  const config = checkpoint.config;
  refuseUnsupported(config, directory);
  if (config.slidingWindow === undefined) throw new Error(`${directory}: no sliding window`);
  const target = GgmlType[weights];
  const a = 'gemma3';
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
    [`${a}.attention.sliding_window`, gguf.u32(config.slidingWindow)],
    [`${a}.rope.dimension_count`, gguf.u32(config.headDim)],
    [`${a}.rope.freq_base`, gguf.f32(config.rope.theta)],
    [`${a}.attention.layer_norm_rms_epsilon`, gguf.f32(config.rmsNormEps)],
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
    const ggufName = gemma3TensorName(hf);
    if (ggufName === undefined) throw new Error(`${directory}: tensor '${hf}' has no llama.cpp gemma3 name`);
    const ne = [...location.shape].reverse();
    let type = ne.length === 1 ? GgmlType.F32 : target;
    if (ne[0] % GGML_BLOCK[type].values !== 0) {
      fallbacks.push(`${ggufName} (${ne[0]} values per row) as F16`);
      type = GgmlType.F16;
    }
    const norm = hf.endsWith('norm.weight');
    plans.push({
      name: ggufName,
      source: hf,
      ne,
      type,
      async data() {
        const values = await checkpoint.readTensor(hf);
        if (norm) for (let i = 0; i < values.length; i++) values[i] += 1; // (1 + w), as convert_hf_to_gguf's norm_shift
        return encodeGgml(values, type);
      },
    });
  }
  const order = (n: string) => (n === 'token_embd.weight' ? -2 : n.startsWith('blk.') ? Number(n.split('.')[1]) : 1e9);
  plans.sort((x, y) => order(x.name) - order(y.name));
  const written = await writeGguf(outPath, metadata, plans);
  const tensors = written.tensors.map((t, i) => ({ name: t.name, source: plans[i].source, type: GgmlType[t.type] as GgmlTypeName, ne: t.ne, bytes: t.bytes }));
  return { path: outPath, weights, fileBytes: written.bytes, tensors, fallbacks, weightBytesPerToken: ggufWeightBytesPerToken(tensors) };
}
