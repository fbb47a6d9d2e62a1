/**
 * Shard graph builder: the ONNX graph of decoder layers [start, end) of one model.
 *
 * Inputs                                      Outputs
 *   hidden_states            [B, seq, H]        hidden_states_out   [B, seq, H]
 *   seqlens_k                [B] int32          new.{l}.key         [B, seq, kvH*D]
 *   total_sequence_length    [] int32           new.{l}.value       [B, seq, kvH*D]
 *   position_ids             [B, seq] int64     present.{l}.key     [B, kvH, max(cap, past+seq), D]
 *   past_key_values.{l}.key  [B, kvH, cap, D]   present.{l}.value
 *   past_key_values.{l}.value
 * for every layer l in [start, end). With past[b] the positions batch entry b holds:
 * `seqlens_k[b]` = past[b] + seq - 1, `total_sequence_length` = max_b past[b] + seq and
 * `position_ids[b]` = past[b] .. past[b]+seq-1 (`sequenceInputs` computes them; fed from
 * the caller rather than computed in the graph: 13 nodes a run fewer, issue 24). The past
 * tensors may have more room (`cap` ≥ every past length: a KV pool's preallocated capacity,
 * or exactly the length when the KV grows step by step). One graph serves prefill (past 0),
 * decode (seq 1), a suffix on a reused prefix, and a batch of sessions each at its own
 * length (seq equal across the batch). Attention is onnxruntime's GroupQueryAttention
 * (com.microsoft) with a separate RotaryEmbedding; it reads each entry's first past[b]
 * positions (a sliding-window layer reads `seqlens_k_window` / `total_sequence_length_window`
 * instead, inputs only graphs with such layers have: its past holds just the window's last
 * positions, so its KV stops growing; rotary still counts from `position_ids`); `new.*` are
 * the K (after rotary) and V of the fed positions alone, so a pool writes just those into its buffers and never fetches the whole cache (onnxruntime's JS
 * API copies every fetched output); `present.*` is the past followed by the new positions,
 * which a runtime keeping KV on the GPU binds back as the next past.
 * Norms are (Skip)SimplifiedLayerNormalization; linear layers are Gemm with transB = 1 over
 * Hugging Face's [out, in] weights, or MatMulNBits over block-quantized ones
 * (onnx/linear-ops.ts), as the weight format says.
 */
import { GraphBuilder, type Attrs } from './onnx/graph-builder.ts';
import { emitLinear } from './onnx/linear-ops.ts';
import { OnnxType, type Initializer, type OnnxGraph, type OnnxTypeCode } from './onnx/onnx-model.ts';
import { ropeCaches } from './rope.ts';
import { layerTensorNames } from './architectures.ts';
import type { LayerRange, ModelConfig, RopeConfig } from './types.ts';
import { layerAttention, windowedLayers } from './layer-attention.ts';
import { geluTanh, plusOne } from './gemma/gemma-graph.ts';
import { emitSparseMlp } from './moe/moe-graph.ts';
import { gptOssAttention } from './moe/gpt-oss-graph.ts';
import { gptOssLayerNames } from './moe/gpt-oss-names.ts';
import { float32ToFloat16Bytes } from './dtype.ts';
import type { GraphWeights } from './weight-plan.ts';
import { rotaryPositions } from './generation-limits.ts';
import type { ActivationDtype } from './activations.ts';
import { emitInPlaceAttention, inPlaceAttention, InPlaceMasks } from './in-place-attention.ts';

export const SHARD_INPUT_HIDDEN = 'hidden_states';
export const SHARD_OUTPUT_HIDDEN = 'hidden_states_out';
export const pastKeyName = (layer: number) => `past_key_values.${layer}.key`;
export const pastValueName = (layer: number) => `past_key_values.${layer}.value`;
export const presentKeyName = (layer: number) => `present.${layer}.key`;
export const presentValueName = (layer: number) => `present.${layer}.value`;
/** Per batch entry: its past length + seq - 1 ([B] int32, GroupQueryAttention's seqlens_k). */
export const SHARD_INPUT_SEQLENS_K = 'seqlens_k';
/** The longest entry's past length + seq ([] int32, GroupQueryAttention's total_sequence_length). */
export const SHARD_INPUT_TOTAL_LENGTH = 'total_sequence_length';
/** Each fed position's index ([B, seq] int64, for rotary; an in-place layer reads each entry's past length from its first). */
export const SHARD_INPUT_POSITION_IDS = 'position_ids';
/** Past positions the in-place layers' `present.*` keep ([1] int64): the past length where present is fetched (replace mode), else 0. Graphs with in-place layers only. */
export const SHARD_INPUT_PRESENT_HELD = 'present_held';

/**
 * The sequence inputs of a run whose entries hold `pasts[b]` positions and each feed `seq`
 * rows, of which `fed[b]` (default all) are real: an in-place graph's batch pads shorter
 * entries, whose padding rows repeat their last real position (computed, never read).
 */
export function sequenceInputs(pasts: readonly number[], seq: number, fed?: readonly number[]): { seqlensK: Int32Array; total: Int32Array; positionIds: BigInt64Array } {
  const real = (b: number) => fed?.[b] ?? seq;
  const positionIds = new BigInt64Array(pasts.length * seq);
  for (let b = 0; b < pasts.length; b++) for (let i = 0; i < seq; i++) positionIds[b * seq + i] = BigInt(pasts[b]! + Math.min(i, real(b) - 1));
  return { seqlensK: Int32Array.from(pasts, (p, b) => p + real(b) - 1), total: Int32Array.of(Math.max(...pasts.map((p, b) => p + real(b)))), positionIds };
}
/** seqlens_k of the sliding-window layers, from the positions their past holds ([B] int32). */
export const SHARD_INPUT_SEQLENS_K_WINDOW = 'seqlens_k_window';
/** total_sequence_length of the sliding-window layers ([] int32). */
export const SHARD_INPUT_TOTAL_LENGTH_WINDOW = 'total_sequence_length_window';
export const newKeyName = (layer: number) => `new.${layer}.key`;
export const newValueName = (layer: number) => `new.${layer}.value`;

export function onnxType(dtype: ActivationDtype): OnnxTypeCode {
  return dtype === 'fp16' ? OnnxType.FLOAT16 : OnnxType.FLOAT;
}

/** Inline float initializer in the activation dtype. */
export function floatInitializer(name: string, dims: number[], values: Float32Array, dtype: ActivationDtype): Initializer {
  const raw = dtype === 'fp16' ? float32ToFloat16Bytes(values) : new Uint8Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength));
  return { name, type: onnxType(dtype), dims, raw };
}


/**
 * How the layers attend: GroupQueryAttention everywhere (default, what artifacts hold), or
 * plain ops reading the past in place where a layer allows (model/in-place-attention.ts; built
 * in memory for tests and benches). Issue 24 measured the two (bench/kv-step.ts, its note):
 * in place is not faster on onnxruntime-node's CPU provider at these shapes (+8% CPU per
 * step at 32 positions, equal at 2,048: its ~27 more nodes a layer cost what GQA's copy of
 * the past does), faster on wasm only at long contexts. Issue 22 measured windowed models
 * (Gemma-3-1B shape) where GQA also copies every local layer's window each step: in place wins
 * there at long contexts, so it is onnxruntime-node CPU's default for them (cpuAttention).
 */
export type AttentionKind = 'in-place' | 'gqa';

export function buildShardGraph(
  config: ModelConfig,
  range: LayerRange,
  dtype: ActivationDtype,
  weights: GraphWeights,
  attention: AttentionKind = 'gqa',
): OnnxGraph {
  if (!(range.start >= 0 && range.end <= config.numLayers && range.start < range.end)) {
    throw new RangeError(`layer range [${range.start}, ${range.end}) is not inside [0, ${config.numLayers})`);
  }
  const g = new GraphBuilder(`layers_${range.start}_${range.end}`);
  const t = onnxType(dtype);
  const { hiddenSize: H, numKvHeads, headDim: D } = config;

  const input = g.input(SHARD_INPUT_HIDDEN, t, ['batch', 'sequence', H]);
  const seqlensK = g.input(SHARD_INPUT_SEQLENS_K, OnnxType.INT32, ['batch']);
  const totalScalar = g.input(SHARD_INPUT_TOTAL_LENGTH, OnnxType.INT32, []);
  const positionIds = g.input(SHARD_INPUT_POSITION_IDS, OnnxType.INT64, ['batch', 'sequence']);
  // In place only when every layer can (then a batch may mix entries of different lengths): else GroupQueryAttention throughout.
  const inPlace = attention === 'in-place' && allInPlace(config, range, dtype);
  const presentHeld = inPlace ? g.input(SHARD_INPUT_PRESENT_HELD, OnnxType.INT64, [1]) : undefined;
  const windowed = new Set(windowedLayers(config, range)?.layers ?? []);
  const window =
    windowed.size > 0
      ? { seqlensK: g.input(SHARD_INPUT_SEQLENS_K_WINDOW, OnnxType.INT32, ['batch']), totalScalar: g.input(SHARD_INPUT_TOTAL_LENGTH_WINDOW, OnnxType.INT32, []) }
      : undefined;
  for (let l = range.start; l < range.end; l++) {
    const capacity = windowed.has(l) ? 'window_capacity' : 'past_capacity';
    g.input(pastKeyName(l), t, ['batch', numKvHeads, capacity, D]);
    g.input(pastValueName(l), t, ['batch', numKvHeads, capacity, D]);
  }

  const rows = g.op1('Shape', [input], { start: 0, end: 2 }); // [2] int64: B, seq

  // MatMulNBits takes [B, seq, K] as it comes, so quantized layers keep the batch axes
  // (about 4 Unsqueeze/Reshape nodes a layer fewer); Gemm needs the 2-D [B*seq, H].
  const batched = weights.batchedLinears;
  const residual = batched ? input : g.op1('Reshape', [input, g.int64([-1, H])]); // [B, seq, H] or [B*seq, H]
  const out = appendDecoderLayers(g, config, range, dtype, weights, { residual, batched, positionIds, seqlensK, totalScalar, rows, newKv: true, attention: inPlace ? 'in-place' : 'gqa', ...(presentHeld ? { presentHeld } : {}), ...(window ? { window } : {}) });
  if (batched) g.op1('Identity', [out], {}, { output: SHARD_OUTPUT_HIDDEN });
  else g.op1('Reshape', [out, g.op1('Concat', [rows, g.int64([H])], { axis: 0 })], {}, { output: SHARD_OUTPUT_HIDDEN });
  g.output(SHARD_OUTPUT_HIDDEN, t, ['batch', 'sequence', H]);
  for (let l = range.start; l < range.end; l++) {
    g.output(newKeyName(l), t, ['batch', 'sequence', numKvHeads * D]);
    g.output(newValueName(l), t, ['batch', 'sequence', numKvHeads * D]);
    g.output(presentKeyName(l), t, ['batch', numKvHeads, 'present_capacity', D]);
    g.output(presentValueName(l), t, ['batch', numKvHeads, 'present_capacity', D]);
  }
  return g.build();
}

/** What the decoder layers read besides weights: the residual stream and sequence bookkeeping. */
export interface DecoderSequence {
  /** The residual stream: 2-D [B*seq, H] so Gemm can read Hugging Face's [out, in] weights, or [B, seq, H] when `batched`. */
  readonly residual: string;
  /** The residual stream keeps its batch axes: every linear is MatMulNBits (`GraphWeights.batchedLinears`). */
  readonly batched?: boolean;
  readonly positionIds: string; // [B, seq] int64
  readonly seqlensK: string; // [B] int32: each entry's total length - 1 (GroupQueryAttention)
  readonly totalScalar: string; // [] int32: the longest entry's total length
  /** [2] int64 holding B and seq; absent: B is 1. */
  readonly rows?: string;
  /** Sequence bookkeeping of the windowed layers, whose past holds only their window; absent: they read the full past. */
  readonly window?: { readonly seqlensK: string; readonly totalScalar: string };
  /** Name each layer's new K (after rotary) and V `new.{l}.key` / `new.{l}.value` [B, seq, kvH*D], for graph outputs. */
  readonly newKv?: boolean;
  /** Default 'gqa' (see AttentionKind); 'in-place' layers take `presentHeld` when given. */
  readonly attention?: AttentionKind;
  /** [1] int64 input SHARD_INPUT_PRESENT_HELD; absent: a complete-model export, whose present keeps the whole past. */
  readonly presentHeld?: string;
}

/** Whether layer `l` attends in place (plain ops) in a graph of `dtype`. */
function layerInPlace(config: ModelConfig, l: number, dtype: ActivationDtype): boolean {
  return inPlaceAttention(layerAttention(config, l), dtype, gptOssLayerNames(config, l) !== undefined);
}


/** Whether every layer of `range` attends in place (then a batch may mix entries of different lengths, padded). */
export function allInPlace(config: ModelConfig, range: LayerRange, dtype: ActivationDtype): boolean {
  for (let l = range.start; l < range.end; l++) if (!layerInPlace(config, l, dtype)) return false;
  return true;
}

/**
 * Append decoder layers [start, end) to `g` (inputs `past_key_values.{l}.*` and outputs
 * `present.{l}.*` must be declared by the caller). Returns the output residual stream
 * [seq, H]. Shared by shard graphs and the complete-model export, so both run the same ops.
 */
export function appendDecoderLayers(
  g: GraphBuilder,
  config: ModelConfig,
  range: LayerRange,
  dtype: ActivationDtype,
  weights: GraphWeights,
  sequence: DecoderSequence,
): string {
  const { numHeads, numKvHeads, headDim: D, rmsNormEps: eps } = config;
  const use = (name: string) => g.initializer(weights.tensor(name));
  const t = onnxType(dtype);
  const tables = rotaryTables(g, config, dtype);
  const norm = (name: string) => (config.gemma ? plusOne(g, use(name), t) : use(name));

  const batchedStream = sequence.batched === true;
  const linear = (x: string, w: string, b?: string) => {
    const weight = weights.linear(w);
    if (batchedStream && weight.kind !== 'nbits') throw new Error(`linear '${w}' is float in a batched (MatMulNBits) stream`);
    return emitLinear(g, x, weight, b ? use(b) : undefined);
  };
  const headNorm = (x: string, heads: number, w: string) => {
    const perHead = g.op1('Reshape', [x, g.int64([-1, heads, D])]);
    const normed = g.op1('SimplifiedLayerNormalization', [perHead, norm(w)], { axis: -1, epsilon: eps, stash_type: 1 });
    if (!batchedStream) return g.op1('Reshape', [normed, g.int64([-1, heads * D])]);
    return g.op1('Reshape', [normed, sequence.rows ? g.op1('Concat', [sequence.rows, g.int64([heads * D])], { axis: 0 }) : g.int64([1, -1, heads * D])]);
  };

  let residual = sequence.residual;
  const { positionIds, seqlensK, totalScalar, rows } = sequence;
  // Partial rotary (Phi-3): only the first rotaryDim dimensions of each head turn.
  const partial: Attrs = config.rotaryDim !== undefined ? { rotary_embedding_dim: config.rotaryDim } : {};
  // longrope: the table holds the short factors' rows, then the long factors'; an entry whose
  // sequence (past + new) is longer than the original context reads the long rows.
  const longrope = config.rope.longrope;
  const ropePositions = longrope
    ? g.op1('Add', [positionIds, g.op1('Mul', [g.op1('Unsqueeze', [g.op1('Cast', [g.op1('Greater', [seqlensK, g.int32([longrope.originalMaxPositionEmbeddings - 1])])], { to: OnnxType.INT64 }), g.int64([1])]), g.int64([rotaryPositions(config)])])])
    : positionIds;
  let pending: string | undefined; // the last sub-block's output, not yet added to the residual
  const inPlace = sequence.attention === 'in-place';
  const masks = new InPlaceMasks(g, positionIds, sequence.presentHeld, sequence.window?.seqlensK);
  for (let l = range.start; l < range.end; l++) {
    const names = layerTensorNames(config, l);
    const attention = layerAttention(config, l);
    const { cos, sin } = attention.localRope ? tables.local! : tables.global;
    const extra = gptOssAttention(g, config, l, weights); // gpt-oss: sinks, o_proj bias
    let normed: string;
    if (pending === undefined) {
      normed = g.op1('SimplifiedLayerNormalization', [residual, norm(names.inputNorm)], { axis: -1, epsilon: eps, stash_type: 1 });
    } else {
      [normed, , , residual] = g.op('SkipSimplifiedLayerNormalization', [pending, residual, norm(names.inputNorm)], { epsilon: eps }, { domain: 'com.microsoft', outputs: 4, label: `l${l}_input_norm` });
    }

    // Quantized: q, k and v as one MatMulNBits (rows stacked), then split (fewer, larger ops).
    const qkv = batchedStream && !names.qkvProj ? weights.linearGroup([names.qProj, names.kProj, names.vProj], [names.qBias, names.kBias, names.vBias]) : undefined;
    let q: string;
    let k: string;
    let v: string;
    // A batched stream's V is already [B, seq, kvH*D]: the split names it `new.{l}.value`
    // itself (no Identity node for the graph output).
    const valueOutput = batchedStream && sequence.newKv ? newValueName(l) : undefined;
    const splitOutputs = valueOutput ? [`l${l}_q_split`, `l${l}_k_split`, valueOutput] : 3;
    if (names.qkvProj) {
      // Phi-3's fused weight as it is: one linear, then split.
      [q, k, v] = g.op('Split', [linear(normed, names.qkvProj), g.int64([numHeads * D, numKvHeads * D, numKvHeads * D])], { axis: -1 }, { outputs: splitOutputs, label: `l${l}_qkv` });
    } else if (qkv) {
      const stacked = emitLinear(g, normed, qkv.weight, qkv.bias ? g.initializer(qkv.bias) : undefined);
      [q, k, v] = g.op('Split', [stacked, g.int64(qkv.sizes)], { axis: -1 }, { outputs: splitOutputs, label: `l${l}_qkv` });
    } else {
      q = linear(normed, names.qProj, names.qBias);
      k = linear(normed, names.kProj, names.kBias);
      v = linear(normed, names.vProj, names.vBias);
    }
    if (names.qNorm && names.kNorm) {
      q = headNorm(q, numHeads, names.qNorm);
      k = headNorm(k, numKvHeads, names.kNorm);
    }
    // [B*seq, n*D] → [B, seq, n*D] (a batched stream is already so)
    const batched = (x: string, heads: number, output?: string) =>
      batchedStream
        ? output === undefined
          ? x
          : g.op1('Identity', [x], {}, { output })
        : rows === undefined
          ? g.op1('Unsqueeze', [x, g.int64([0])], {}, { output })
          : g.op1('Reshape', [x, g.op1('Concat', [rows, g.int64([heads * D])], { axis: 0 })], {}, { output });
    // Rotary as its own op: GroupQueryAttention's built-in rotary needs headDim % 16 == 0.
    const rotary = (x: string, heads: number, output?: string) =>
      g.op1('RotaryEmbedding', [batched(x, heads), ropePositions, cos, sin], { interleaved: 0, num_heads: heads, ...partial }, { domain: 'com.microsoft', output });
    const newKey = rotary(k, numKvHeads, sequence.newKv ? newKeyName(l) : undefined);
    const newValue = valueOutput !== undefined && v === valueOutput ? v : batched(v, numKvHeads, sequence.newKv ? newValueName(l) : undefined);
    // local_window_size is Hugging Face's window (checked against the reference: it counts the query's own position).
    const groupQueryAttention = (query: string) => g.op(
      'GroupQueryAttention',
      [
        query, newKey, newValue, pastKeyName(l), pastValueName(l),
        ...(attention.window !== undefined && sequence.window ? [sequence.window.seqlensK, sequence.window.totalScalar] : [seqlensK, totalScalar]),
        ...(extra.sinks ? ['', '', '', '', extra.sinks] : []),
      ],
      {
        num_heads: numHeads,
        kv_num_heads: numKvHeads,
        scale: { float: attention.scale },
        ...(attention.window !== undefined ? { local_window_size: attention.window } : {}),
        ...(attention.softcap !== undefined ? { softcap: { float: attention.softcap } } : {}),
      },
      { domain: 'com.microsoft', outputs: ['attention_' + l, presentKeyName(l), presentValueName(l)] },
    )[0];
    const query = rotary(q, numHeads);
    const attended = inPlace && inPlaceAttention(attention, dtype, extra.sinks !== undefined)
      ? emitInPlaceAttention(g, { numHeads, numKvHeads, headDim: D, scale: attention.scale, ...(attention.window !== undefined ? { window: attention.window } : {}), ...(attention.softcap !== undefined ? { softcap: attention.softcap } : {}) }, masks, {
          q: query, newKey, newValue, pastKey: pastKeyName(l), pastValue: pastValueName(l), output: 'attention_' + l, presentKey: presentKeyName(l), presentValue: presentValueName(l),
        })
      : groupQueryAttention(query);
    const attnOut = linear(batchedStream ? attended : g.op1('Reshape', [attended, g.int64([-1, numHeads * D])]), names.oProj, extra.oBias);

    // Gemma norms the attention output itself, then again before the MLP (pre_feedforward).
    const sandwich = names.preFeedforwardNorm !== undefined;
    const attnBlock = sandwich ? g.op1('SimplifiedLayerNormalization', [attnOut, norm(names.postNorm)], { axis: -1, epsilon: eps, stash_type: 1 }) : attnOut;
    const mlpNorm = sandwich ? norm(names.preFeedforwardNorm!) : use(names.postNorm);
    const [postNormed, , , afterAttention] = g.op('SkipSimplifiedLayerNormalization', [attnBlock, residual, mlpNorm], { epsilon: eps }, { domain: 'com.microsoft', outputs: 4, label: `l${l}_post_norm` });
    residual = afterAttention;
    const sparse = emitSparseMlp(g, postNormed, config, l, dtype, weights); // MoE (moe/)
    if (sparse !== undefined) {
      pending = sparse;
      continue;
    }
    const gateUp = batchedStream && !names.gateUpProj ? weights.linearGroup([names.gateProj, names.upProj]) : undefined;
    let gate: string;
    let up: string;
    if (names.gateUpProj) [gate, up] = g.op('Split', [linear(postNormed, names.gateUpProj), g.int64([config.intermediateSize, config.intermediateSize])], { axis: -1 }, { outputs: 2, label: `l${l}_gate_up` });
    else if (gateUp) [gate, up] = g.op('Split', [emitLinear(g, postNormed, gateUp.weight), g.int64(gateUp.sizes)], { axis: -1 }, { outputs: 2, label: `l${l}_gate_up` });
    else [gate, up] = [linear(postNormed, names.gateProj), linear(postNormed, names.upProj)];
    const activated = config.gemma ? geluTanh(g, gate, t) : g.op1('Mul', [gate, g.op1('Sigmoid', [gate])]);
    const down = linear(g.op1('Mul', [activated, up]), names.downProj);
    pending = sandwich ? g.op1('SimplifiedLayerNormalization', [down, norm(names.postFeedforwardNorm!)], { axis: -1, epsilon: eps, stash_type: 1 }) : down;
  }
  return g.op1('Add', [pending!, residual]);
}

/** The rotary cos/sin caches `[positions, rotaryDim / 2]`: the global layers', and the local layers' when they differ. */
function rotaryTables(g: GraphBuilder, config: ModelConfig, dtype: ActivationDtype) {
  const positions = rotaryPositions(config);
  const dim = config.rotaryDim ?? config.headDim;
  const table = (rope: RopeConfig, name: string) => {
    const caches = ropeCaches(rope, dim, positions);
    if (rope.longrope) {
      const long = ropeCaches(rope, dim, positions, 'long');
      const rows = (a: Float32Array, b: Float32Array) => {
        const both = new Float32Array(a.length + b.length);
        both.set(a);
        both.set(b, a.length);
        return both;
      };
      return {
        cos: g.initializer(floatInitializer(`${name}_cos`, [2 * positions, dim / 2], rows(caches.cos, long.cos), dtype)),
        sin: g.initializer(floatInitializer(`${name}_sin`, [2 * positions, dim / 2], rows(caches.sin, long.sin), dtype)),
      };
    }
    return {
      cos: g.initializer(floatInitializer(`${name}_cos`, [positions, dim / 2], caches.cos, dtype)),
      sin: g.initializer(floatInitializer(`${name}_sin`, [positions, dim / 2], caches.sin, dtype)),
    };
  };
  return { global: table(config.rope, 'rotary'), ...(config.localRope ? { local: table(config.localRope, 'rotary_local') } : {}) };
}
