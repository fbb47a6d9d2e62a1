/**
 * A random-weight Llama checkpoint of a given shape (SmolLM2-135M's in fp32, Llama-3.2-1B's
 * in bf16), written fast: tensors are streamed to model.safetensors in chunks of rows (no
 * whole-tensor buffer: the 1B's embedding alone is 263 M values) from a xorshift
 * generator giving uniform values with the fixture's standard deviations (shapes and
 * scales matter for speed, the exact distribution does not). Tokenizer: the fixtures'
 * WordLevel stand-in (`t<i>`), which meshnet's head and transformers.js both load offline.
 * A folder already complete (`.complete` marker with the same options) is reused.
 */
import { mkdir, open, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { tinyTokenizerFiles } from '../test/fixtures/tiny-tokenizer.ts';

export interface GeneratedShape {
  readonly hiddenSize: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly intermediateSize: number;
  readonly vocabSize: number;
  readonly maxPositionEmbeddings: number;
  readonly tied: boolean;
  readonly seed: number;
  /** Stored dtype (default F32). BF16 values are the F32 ones rounded to nearest even. */
  readonly dtype?: 'F32' | 'BF16';
  /** rope_theta (default 100,000). */
  readonly ropeTheta?: number;
  /** Gemma 3 (Gemma3ForCausalLM, gemma3_text): its head size, window and local/global pattern. */
  readonly gemma3?: { readonly headDim: number; readonly slidingWindow: number; readonly pattern: number };
}

/**
 * Gemma-3-1B's shape (issue #22's bench model): 26 layers of hidden 1152, intermediate 6912,
 * 4 query / 1 KV heads of 256 (head size independent of the hidden), a 262,144-token tied
 * embedding, window 512 on five local layers to one global, 32,768 positions. bf16: 2.0 GB.
 */
export const GEMMA_3_1B_SHAPE: GeneratedShape = {
  hiddenSize: 1152,
  numLayers: 26,
  numHeads: 4,
  numKvHeads: 1,
  intermediateSize: 6912,
  vocabSize: 262144,
  maxPositionEmbeddings: 32768,
  tied: true,
  seed: 2231,
  dtype: 'BF16',
  ropeTheta: 1000000,
  gemma3: { headDim: 256, slidingWindow: 512, pattern: 6 },
};

export const SMOLLM2_135M_SHAPE: GeneratedShape = {
  hiddenSize: 576,
  numLayers: 30,
  numHeads: 9,
  numKvHeads: 3,
  intermediateSize: 1536,
  vocabSize: 49152,
  maxPositionEmbeddings: 8192, // SmolLM2-135M's own context
  tied: true,
  seed: 135,
};

/**
 * Llama-3.2-1B's shape (issue #24's bandwidth-bound bench model): 16 layers of hidden 2048,
 * intermediate 8192, 32 query / 8 KV heads of 64, a 128,256-token tied embedding, 8,192
 * positions (Llama-3.2's own 131,072 with llama3 rope scaling is left out: the shape, not the
 * rope, sets the speed, and the GGUF writer takes plain rope). bf16, as the Hub ships it:
 * 2.47 GB on disk.
 */
export const LLAMA_3_2_1B_SHAPE: GeneratedShape = {
  hiddenSize: 2048,
  numLayers: 16,
  numHeads: 32,
  numKvHeads: 8,
  intermediateSize: 8192,
  vocabSize: 128256,
  maxPositionEmbeddings: 8192,
  tied: true,
  seed: 1236,
  dtype: 'BF16',
  ropeTheta: 500000,
};

/** F32 → BF16 bits, round to nearest even (NaN stays NaN). */
export function bf16Bits(values: Float32Array): Uint16Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < bits.length; i++) {
    const x = bits[i]!;
    out[i] = (x & 0x7fffffff) > 0x7f800000 ? (x >>> 16) | 0x40 : (x + 0x7fff + ((x >>> 16) & 1)) >>> 16;
  }
  return out;
}

/** Values per write: 4 M (16 MiB of F32). */
const CHUNK_VALUES = 1 << 22;

interface TensorPlan {
  readonly name: string;
  readonly shape: number[];
  readonly std: number;
  readonly mean: number;
}

function plan(s: GeneratedShape): TensorPlan[] {
  if (s.gemma3) return gemma3Plan(s, s.gemma3.headDim);
  const D = s.hiddenSize / s.numHeads;
  const t: TensorPlan[] = [];
  const add = (name: string, shape: number[], std: number, mean = 0) => t.push({ name, shape, std, mean });
  const linear = (name: string, out: number, inFeatures: number) => add(name, [out, inFeatures], 0.5 / Math.sqrt(inFeatures));
  add('model.embed_tokens.weight', [s.vocabSize, s.hiddenSize], 0.1);
  for (let l = 0; l < s.numLayers; l++) {
    const p = `model.layers.${l}`;
    add(`${p}.input_layernorm.weight`, [s.hiddenSize], 0.05, 1);
    linear(`${p}.self_attn.q_proj.weight`, s.numHeads * D, s.hiddenSize);
    linear(`${p}.self_attn.k_proj.weight`, s.numKvHeads * D, s.hiddenSize);
    linear(`${p}.self_attn.v_proj.weight`, s.numKvHeads * D, s.hiddenSize);
    linear(`${p}.self_attn.o_proj.weight`, s.hiddenSize, s.numHeads * D);
    add(`${p}.post_attention_layernorm.weight`, [s.hiddenSize], 0.05, 1);
    linear(`${p}.mlp.gate_proj.weight`, s.intermediateSize, s.hiddenSize);
    linear(`${p}.mlp.up_proj.weight`, s.intermediateSize, s.hiddenSize);
    linear(`${p}.mlp.down_proj.weight`, s.hiddenSize, s.intermediateSize);
  }
  add('model.norm.weight', [s.hiddenSize], 0.05, 1);
  if (!s.tied) add('lm_head.weight', [s.vocabSize, s.hiddenSize], 0.1);
  return t;
}

/** Gemma 3's tensors: q/k norms, sandwich norms ((1 + w): weights around 0). */
function gemma3Plan(s: GeneratedShape, D: number): TensorPlan[] {
  const t: TensorPlan[] = [];
  const add = (name: string, shape: number[], std: number, mean = 0) => t.push({ name, shape, std, mean });
  const linear = (name: string, out: number, inFeatures: number) => add(name, [out, inFeatures], 0.5 / Math.sqrt(inFeatures));
  add('model.embed_tokens.weight', [s.vocabSize, s.hiddenSize], 0.1);
  for (let l = 0; l < s.numLayers; l++) {
    const p = `model.layers.${l}`;
    add(`${p}.input_layernorm.weight`, [s.hiddenSize], 0.05);
    linear(`${p}.self_attn.q_proj.weight`, s.numHeads * D, s.hiddenSize);
    linear(`${p}.self_attn.k_proj.weight`, s.numKvHeads * D, s.hiddenSize);
    linear(`${p}.self_attn.v_proj.weight`, s.numKvHeads * D, s.hiddenSize);
    linear(`${p}.self_attn.o_proj.weight`, s.hiddenSize, s.numHeads * D);
    add(`${p}.self_attn.q_norm.weight`, [D], 0.05);
    add(`${p}.self_attn.k_norm.weight`, [D], 0.05);
    add(`${p}.post_attention_layernorm.weight`, [s.hiddenSize], 0.05);
    add(`${p}.pre_feedforward_layernorm.weight`, [s.hiddenSize], 0.05);
    add(`${p}.post_feedforward_layernorm.weight`, [s.hiddenSize], 0.05);
    linear(`${p}.mlp.gate_proj.weight`, s.intermediateSize, s.hiddenSize);
    linear(`${p}.mlp.up_proj.weight`, s.intermediateSize, s.hiddenSize);
    linear(`${p}.mlp.down_proj.weight`, s.hiddenSize, s.intermediateSize);
  }
  add('model.norm.weight', [s.hiddenSize], 0.05);
  return t;
}

/** config.json of a generated shape: Llama's, or Gemma 3's keys (as google/gemma-3-1b-pt's). */
function configOf(shape: GeneratedShape, dtype: 'F32' | 'BF16'): Record<string, unknown> {
  const common = {
    hidden_size: shape.hiddenSize,
    intermediate_size: shape.intermediateSize,
    num_hidden_layers: shape.numLayers,
    num_attention_heads: shape.numHeads,
    num_key_value_heads: shape.numKvHeads,
    vocab_size: shape.vocabSize,
    max_position_embeddings: shape.maxPositionEmbeddings,
    tie_word_embeddings: shape.tied,
    torch_dtype: dtype === 'BF16' ? 'bfloat16' : 'float32',
    bos_token_id: 1,
    eos_token_id: 2,
    attention_bias: false,
  };
  const g = shape.gemma3;
  if (!g) return { architectures: ['LlamaForCausalLM'], model_type: 'llama', ...common, rms_norm_eps: 1e-5, rope_theta: shape.ropeTheta ?? 100000, hidden_act: 'silu' };
  return {
    architectures: ['Gemma3ForCausalLM'],
    model_type: 'gemma3_text',
    ...common,
    head_dim: g.headDim,
    rms_norm_eps: 1e-6,
    rope_theta: shape.ropeTheta ?? 1000000,
    rope_local_base_freq: 10000,
    rope_scaling: null,
    hidden_activation: 'gelu_pytorch_tanh',
    query_pre_attn_scalar: g.headDim,
    sliding_window: g.slidingWindow,
    layer_types: Array.from({ length: shape.numLayers }, (_, i) => ((i + 1) % g.pattern === 0 ? 'full_attention' : 'sliding_attention')),
    attn_logit_softcapping: null,
    final_logit_softcapping: null,
  };
}

/** Write (or reuse) the checkpoint folder `dir`. Returns `dir`. */
export async function generateCheckpoint(dir: string, shape: GeneratedShape = SMOLLM2_135M_SHAPE): Promise<string> {
  const marker = path.join(dir, '.complete');
  const stamp = JSON.stringify(shape);
  if ((await readFile(marker, 'utf8').catch(() => '')) === stamp) return dir;
  await mkdir(dir, { recursive: true });
  const tensors = plan(shape);
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  const dtype = shape.dtype ?? 'F32';
  const width = dtype === 'BF16' ? 2 : 4;
  let offset = 0;
  for (const t of tensors) {
    const bytes = t.shape.reduce((a, b) => a * b, 1) * width;
    header[t.name] = { dtype, shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8); // data starts 8-aligned
  const prefix = new Uint8Array(8 + json.length);
  new DataView(prefix.buffer).setBigUint64(0, BigInt(json.length), true);
  prefix.set(new TextEncoder().encode(json), 8);

  const file = await open(path.join(dir, 'model.safetensors'), 'w');
  try {
    await file.write(prefix);
    let state = (shape.seed * 2654435761) >>> 0 || 1;
    const buffer = new Float32Array(CHUNK_VALUES);
    for (const t of tensors) {
      const count = t.shape.reduce((a, b) => a * b, 1);
      const scale = t.std * Math.sqrt(3) * 2; // uniform on [-√3σ, √3σ] has standard deviation σ
      for (let done = 0; done < count; done += CHUNK_VALUES) {
        const values = buffer.subarray(0, Math.min(CHUNK_VALUES, count - done));
        for (let i = 0; i < values.length; i++) {
          state ^= state << 13;
          state ^= state >>> 17;
          state ^= state << 5;
          values[i] = t.mean + ((state >>> 0) / 4294967296 - 0.5) * scale;
        }
        const out = dtype === 'BF16' ? bf16Bits(values) : values;
        await file.write(new Uint8Array(out.buffer, out.byteOffset, out.byteLength));
      }
    }
  } finally {
    await file.close();
  }
  const config = configOf(shape, dtype);
  await writeFile(path.join(dir, 'config.json'), `${JSON.stringify(config, null, 2)}\n`);
  await writeFile(path.join(dir, 'generation_config.json'), `${JSON.stringify({ bos_token_id: 1, eos_token_id: 2 }, null, 2)}\n`);
  for (const [name, text] of tinyTokenizerFiles(shape.vocabSize)) await writeFile(path.join(dir, name), text);
  await writeFile(marker, stamp);
  return dir;
}
