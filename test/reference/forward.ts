/**
 * Pure-TypeScript reference forward pass for Llama-family decoders (Llama, Mistral, Qwen2,
 * Qwen3; Mixtral, Qwen2-MoE and Qwen3-MoE through moe-forward.ts) and Gemma 2 / Gemma 3
 * (modeling_gemma2.py, modeling_gemma3.py: √hidden-scaled embedding, (1 + w) RMSNorms in
 * fp32, norms before and after attention and MLP, GELU-tanh, query_pre_attn_scalar, attention
 * and final softcaps, sliding layers with their own rotary), with Hugging Face transformers
 * semantics; Phi-3 (modeling_phi3.py: fused qkv_proj / gate_up_proj, partial rotary,
 * longrope with factors chosen by the sequence length) likewise. Naive loops, no dependencies: it exists so tests can check the ONNX shard graphs
 * against something obviously correct.
 *
 * Precision: every activation is stored as float32 between operations (what an fp32 graph
 * holds), while every reduction — dot products, the RMSNorm mean of squares, softmax sums —
 * accumulates in float64. So results match an fp32 graph to ~1e-5 relative, not bit for bit.
 * The rotary angle is rounded to float32 like Hugging Face (`position * inv_freq` in fp32).
 */
import { ropeInverseFrequencies } from '../../src/core/model/rope.ts';
import { referenceMoeBlock } from './moe-forward.ts';
import { referenceGptOssMoe } from './gpt-oss-forward.ts';
import { gptOssLayerNames } from '../../src/core/model/moe/gpt-oss-names.ts';
import type { LayerRange, ModelConfig } from '../../src/core/model/types.ts';
import { geluTanh, linear, perHeadRmsNorm, rmsNorm, rotateHalf, softcap, tensor } from './ops.ts';

/** Tensor source: Hugging Face tensor names, row-major float32, `[out, in]` for linear weights. */
export interface ReferenceWeights {
  get(name: string): Float32Array;
  /** Whether `name` is there (lets a tied model's LM head differ from its embedding, e.g. each quantized in its own layout). */
  has?(name: string): boolean;
  /** Told each MoE layer's chosen experts, per token (moe-forward.ts). */
  onRoute?(layer: number, experts: readonly number[]): void;
}

/**
 * KV cache of the reference pass, per absolute layer index. Keys are stored after rotary
 * (and q/k norm); each entry is one position, `[numKvHeads * headDim]`.
 */
export class ReferenceKvCache {
  private readonly layers = new Map<number, { keys: Float32Array[]; values: Float32Array[] }>();

  /** Positions held for `layer` (0 for a layer never run). */
  lengthOf(layer: number): number {
    return this.layers.get(layer)?.keys.length ?? 0;
  }

  /** Keys and values of `layer`, one `[numKvHeads * headDim]` array per position. Live arrays: `append` grows them. */
  entries(layer: number): { keys: Float32Array[]; values: Float32Array[] } {
    let entry = this.layers.get(layer);
    if (!entry) {
      entry = { keys: [], values: [] };
      this.layers.set(layer, entry);
    }
    return entry;
  }

  append(layer: number, key: Float32Array, value: Float32Array): void {
    const entry = this.entries(layer);
    entry.keys.push(key);
    entry.values.push(value);
  }

  /** Drops every position at or after `length` in every layer. */
  truncate(length: number): void {
    for (const entry of this.layers.values()) {
      entry.keys.length = Math.min(entry.keys.length, length);
      entry.values.length = Math.min(entry.values.length, length);
    }
  }
}

/** `model.`, or `language_model.model.` (Gemma3ForConditionalGeneration). */
function prefixOf(config: ModelConfig): string {
  return config.tensorPrefix ?? 'model.';
}

/** An RMSNorm weight: Gemma's multiplies by (1 + w), computed in fp32. */
function normWeight(config: ModelConfig, weights: ReferenceWeights, name: string, size: number): Float32Array {
  const w = tensor(weights, name, size);
  return config.gemma ? w.map((v) => 1 + v) : w;
}

/** Hidden state `[hiddenSize]` of each token: rows of `model.embed_tokens.weight` (times √hidden for Gemma). */
export function referenceEmbed(config: ModelConfig, weights: ReferenceWeights, tokenIds: number[]): Float32Array[] {
  const { hiddenSize, vocabSize } = config;
  const table = tensor(weights, `${prefixOf(config)}embed_tokens.weight`, vocabSize * hiddenSize); // [vocab, hidden]
  const scale = Math.fround(Math.sqrt(hiddenSize)); // Gemma: the normalizer in the activation dtype (fp32 here)
  return tokenIds.map((id) => {
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) throw new RangeError(`token id ${id} outside [0, ${vocabSize})`);
    const row = table.slice(id * hiddenSize, (id + 1) * hiddenSize);
    if (config.gemma) for (let i = 0; i < hiddenSize; i++) row[i] *= scale;
    return row;
  });
}

/**
 * Runs decoder layers `[range.start, range.end)` over the new positions `hidden`
 * (`[hiddenSize]` each), returning their output hidden states. Positions continue after the
 * cache's length for `range.start`; the new keys and values are appended to `kv`. Without
 * `kv` the positions start at 0 and nothing is kept.
 */
export function referenceLayers(
  config: ModelConfig,
  weights: ReferenceWeights,
  hidden: Float32Array[],
  range: LayerRange,
  kv: ReferenceKvCache = new ReferenceKvCache(),
): Float32Array[] {
  if (!Number.isInteger(range.start) || !Number.isInteger(range.end) || range.start < 0 || range.end > config.numLayers || range.start >= range.end) {
    throw new RangeError(`layer range [${range.start}, ${range.end}) not inside [0, ${config.numLayers})`);
  }
  const past = kv.lengthOf(range.start);
  for (let layer = range.start; layer < range.end; layer++) {
    if (kv.lengthOf(layer) !== past) throw new Error(`KV cache layer ${layer} holds ${kv.lengthOf(layer)} positions, layer ${range.start} holds ${past}`);
  }
  for (const h of hidden) {
    if (h.length !== config.hiddenSize) throw new RangeError(`hidden state has ${h.length} values, expected ${config.hiddenSize}`);
  }
  let states: Float32Array[] = hidden.map((h) => Float32Array.from(h));
  for (let layer = range.start; layer < range.end; layer++) {
    states = states.map((h, i) => decoderLayer(config, weights, layer, h, past + i, kv, past + hidden.length));
  }
  return states;
}

/** Logits `[vocabSize]` for one hidden state: final RMSNorm, then the LM head (tied or not). */
export function referenceHead(config: ModelConfig, weights: ReferenceWeights, hidden: Float32Array): Float32Array {
  const { hiddenSize, vocabSize } = config;
  const prefix = prefixOf(config);
  const normed = rmsNorm(hidden, normWeight(config, weights, `${prefix}norm.weight`, hiddenSize), config.rmsNormEps);
  const untied = `${prefix.slice(0, -'model.'.length)}lm_head.weight`;
  const headName = config.tieWordEmbeddings && !weights.has?.(untied) ? `${prefix}embed_tokens.weight` : untied;
  const logits = linear(normed, tensor(weights, headName, vocabSize * hiddenSize), vocabSize); // [vocab]
  const cap = config.gemma?.finalLogitSoftcap;
  return cap === undefined ? logits : logits.map((l) => softcap(l, cap));
}

/** Logits `[vocabSize]` for every position of `tokenIds`, starting at position 0. */
export function referenceForward(config: ModelConfig, weights: ReferenceWeights, tokenIds: number[]): Float32Array[] {
  const hidden = referenceEmbed(config, weights, tokenIds);
  const out = referenceLayers(config, weights, hidden, { start: 0, end: config.numLayers });
  return out.map((h) => referenceHead(config, weights, h));
}

/**
 * Layer `layer`'s attention, read from the config the way transformers does: a window when
 * `sliding_window` applies to it (every layer, or those `slidingLayers` marks), Gemma 3's local
 * rotary on windowed layers, Gemma's query_pre_attn_scalar and softcap.
 */
function attentionOf(config: ModelConfig, layer: number, total: number) {
  const windowed = config.slidingWindow !== undefined && (config.slidingLayers === undefined || config.slidingLayers[layer] === true);
  const rope = windowed && config.localRope ? config.localRope : config.rope;
  const rotaryDim = config.rotaryDim ?? config.headDim;
  // longrope (Phi-3): long factors once the sequence is longer than the original context.
  const long = rope.longrope !== undefined && total > rope.longrope.originalMaxPositionEmbeddings;
  return {
    window: windowed ? config.slidingWindow : undefined,
    invFreq: ropeInverseFrequencies(rope, rotaryDim, long ? 'long' : 'short'),
    attentionFactor: rope.longrope?.attentionFactor ?? rope.yarn?.attentionFactor ?? 1, // YaRN scales cos and sin too
    rotaryDim,
    scale: 1 / Math.sqrt(config.gemma ? config.gemma.queryPreAttnScalar : config.headDim),
    softcap: config.gemma?.attnLogitSoftcap,
  };
}

/** One decoder layer over one position; appends this position's key and value to `kv`. */
function decoderLayer(
  config: ModelConfig,
  weights: ReferenceWeights,
  layer: number,
  x: Float32Array, // [hidden]
  position: number,
  kv: ReferenceKvCache,
  total: number, // positions in the sequence after this step (longrope picks its factors by it)
): Float32Array {
  const { hiddenSize: hs, numHeads, numKvHeads, headDim, intermediateSize, rmsNormEps: eps } = config;
  const p = `${prefixOf(config)}layers.${layer}.`;
  const qSize = numHeads * headDim;
  const kvSize = numKvHeads * headDim;
  const norm = (name: string, size = hs) => normWeight(config, weights, p + name, size);
  const attention = attentionOf(config, layer, total);

  // Attention block.
  const a = rmsNorm(x, norm('input_layernorm.weight'), eps);
  const bias = (name: string, n: number) => (config.attentionBias ? tensor(weights, `${p}self_attn.${name}.bias`, n) : undefined);
  let q: Float32Array, k: Float32Array, v: Float32Array;
  if (config.fusedProjections) {
    // Phi-3: qkv_proj rows are q, then k, then v.
    const qkv = linear(a, tensor(weights, `${p}self_attn.qkv_proj.weight`, (qSize + 2 * kvSize) * hs), qSize + 2 * kvSize);
    [q, k, v] = [qkv.slice(0, qSize), qkv.slice(qSize, qSize + kvSize), qkv.slice(qSize + kvSize)];
  } else {
    q = linear(a, tensor(weights, `${p}self_attn.q_proj.weight`, qSize * hs), qSize, bias('q_proj', qSize)); // [heads * headDim]
    k = linear(a, tensor(weights, `${p}self_attn.k_proj.weight`, kvSize * hs), kvSize, bias('k_proj', kvSize)); // [kvHeads * headDim]
    v = linear(a, tensor(weights, `${p}self_attn.v_proj.weight`, kvSize * hs), kvSize, bias('v_proj', kvSize)); // [kvHeads * headDim]
  }
  if (config.qkNorm) {
    perHeadRmsNorm(q, norm('self_attn.q_norm.weight', headDim), headDim, eps);
    perHeadRmsNorm(k, norm('self_attn.k_norm.weight', headDim), headDim, eps);
  }
  rotateHalf(q, headDim, position, attention.invFreq, attention.rotaryDim, attention.attentionFactor);
  rotateHalf(k, headDim, position, attention.invFreq, attention.rotaryDim, attention.attentionFactor);
  kv.append(layer, k, v);
  const { keys, values } = kv.entries(layer); // positions 0..position inclusive
  const context = new Float32Array(qSize); // [heads * headDim]
  const groupSize = numHeads / numKvHeads;
  // Causal by construction: the cache holds only positions <= this one. A sliding window
  // keeps keys j with position - j < window, as transformers' mask does.
  const first = attention.window === undefined ? 0 : Math.max(0, position - attention.window + 1);
  const gptOss = gptOssLayerNames(config, layer);
  const sinks = gptOss ? tensor(weights, gptOss.sinks, numHeads) : undefined; // gpt-oss: one more logit per head, dropped after the softmax
  const scores = new Float64Array(position + 1);
  for (let h = 0; h < numHeads; h++) {
    const qo = h * headDim;
    const ko = Math.floor(h / groupSize) * headDim; // grouped-query: kv head shared by groupSize query heads
    let max = sinks ? sinks[h] : -Infinity;
    for (let j = first; j <= position; j++) {
      let dot = 0;
      for (let d = 0; d < headDim; d++) dot += q[qo + d] * keys[j][ko + d];
      scores[j] = attention.softcap === undefined ? dot * attention.scale : softcap(dot * attention.scale, attention.softcap);
      if (scores[j] > max) max = scores[j];
    }
    let sum = sinks ? Math.exp(sinks[h] - max) : 0;
    for (let j = first; j <= position; j++) sum += scores[j] = Math.exp(scores[j] - max);
    for (let d = 0; d < headDim; d++) {
      let acc = 0;
      for (let j = first; j <= position; j++) acc += scores[j] * values[j][ko + d];
      context[qo + d] = acc / sum;
    }
  }
  let attn = linear(context, tensor(weights, `${p}self_attn.o_proj.weight`, hs * qSize), hs, gptOss ? tensor(weights, gptOss.oBias, hs) : undefined); // [hidden]
  if (config.gemma) attn = rmsNorm(attn, norm('post_attention_layernorm.weight'), eps);
  const mid = new Float32Array(hs);
  for (let i = 0; i < hs; i++) mid[i] = x[i] + attn[i];

  // MLP block: down(act(gate(x)) * up(x)), act = silu (GELU-tanh for Gemma).
  const m = rmsNorm(mid, norm(config.gemma ? 'pre_feedforward_layernorm.weight' : 'post_attention_layernorm.weight'), eps);
  const moe = referenceMoeBlock(config, weights, layer, m) ?? referenceGptOssMoe(config, weights, layer, m); // a sparse layer (moe-forward.ts, gpt-oss-forward.ts)
  if (moe) return mid.map((v, i) => v + moe[i]);
  let gate: Float32Array, up: Float32Array;
  if (config.fusedProjections) {
    // Phi-3: gate_up_proj rows are gate, then up (`gate, up = chunk(2)`).
    const both = linear(m, tensor(weights, `${p}mlp.gate_up_proj.weight`, 2 * intermediateSize * hs), 2 * intermediateSize);
    [gate, up] = [both.slice(0, intermediateSize), both.slice(intermediateSize)];
  } else {
    gate = linear(m, tensor(weights, `${p}mlp.gate_proj.weight`, intermediateSize * hs), intermediateSize); // [intermediate]
    up = linear(m, tensor(weights, `${p}mlp.up_proj.weight`, intermediateSize * hs), intermediateSize); // [intermediate]
  }
  for (let i = 0; i < intermediateSize; i++) gate[i] = (config.gemma ? geluTanh(gate[i]) : gate[i] / (1 + Math.exp(-gate[i]))) * up[i];
  let down = linear(gate, tensor(weights, `${p}mlp.down_proj.weight`, hs * intermediateSize), hs); // [hidden]
  if (config.gemma) down = rmsNorm(down, norm('post_feedforward_layernorm.weight'), eps);
  const out = new Float32Array(hs);
  for (let i = 0; i < hs; i++) out[i] = mid[i] + down[i];
  return out;
}
