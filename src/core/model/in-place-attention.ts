/**
 * Attention from plain ops that reads the pooled past KV where it lies (issue 24), in place of
 * GroupQueryAttention, whose CPU kernel copies the whole past into a new present buffer on
 * every run (so a decode step's cost grew with the pool's capacity, beyond attention's own
 * read). bench/kv-attention.ts measured the two at one layer: 0.259 against 0.661 ms at 2,048
 * positions.
 *
 * Per layer, with B entries of S fed positions each over a past of capacity C:
 *   q [B, S, H*D] → [B, kvH, G*S, D] (query head h = kv head h / G, rows g-major), scaled;
 *   scores = [q · pastKᵀ (positions ≥ the entry's past length masked) | q · newKᵀ (causal)];
 *   softmax over the C + S columns; out = p_past · pastV + p_new · newV → [B, S, H*D].
 * An entry's past length is its first position id (full-attention layers count from 0), so
 * entries of a batch may hold different pasts; and since a query sees only new keys at or
 * before its own row, an entry padded to S rows (fewer real positions than the batch's
 * longest) computes its real rows exactly as alone: entries of several positions batch with
 * single-position ones. `present.*` (batch 1) is the first `present_held` past positions followed
 * by the new ones: the GPU's replace mode feeds the past length, a pooled run 0 (onnxruntime
 * runs every node whether its output is fetched or not, and a whole-past Concat would cost
 * what GroupQueryAttention's present did).
 *
 * A sliding-window layer (issue 22) reads its own past length from `seqlens_k_window` (its past
 * holds only the window's last positions, index c at position start − held + c) and masks keys
 * a window or more behind each query row, as the TypeScript reference and Hugging Face do; a
 * softcap (Gemma 2) is tanh(s / cap) · cap on the scores before the masks.
 *
 * Not for sinks (gpt-oss) nor fp16 activations (`inPlaceAttention` decides): GroupQueryAttention there.
 */
import type { GraphBuilder } from './onnx/graph-builder.ts';
import { OnnxType } from './onnx/onnx-model.ts';
import type { LayerAttention } from './layer-attention.ts';
import type { ActivationDtype } from './activations.ts';

/** Whether a layer's attention runs as plain ops (else GroupQueryAttention). */
export function inPlaceAttention(attention: LayerAttention, dtype: ActivationDtype, sinks: boolean): boolean {
  return dtype === 'fp32' && !sinks;
}

export interface AttentionShape {
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly scale: number;
  /** Positions a query sees, itself included (a sliding-window layer). */
  readonly window?: number;
  /** Scores become tanh(s / softcap) · softcap (Gemma 2). */
  readonly softcap?: number;
}

/** The masks every in-place layer of a graph shares (one past capacity, one batch), built once. */
export class InPlaceMasks {
  private past?: string;
  private causal?: string;
  private split?: string;
  private windowPast?: string;
  private windowCausal?: string;
  private windowSplit?: string;

  constructor(
    private readonly g: GraphBuilder,
    private readonly positionIds: string, // [B, S] int64
    /** [1] int64: past positions the present outputs keep (SHARD_INPUT_PRESENT_HELD); absent: the first entry's past length. */
    private held?: string,
    /** [B] int32: the windowed layers' seqlens_k (held + S − 1 each), when the graph has windowed layers. */
    private readonly windowSeqlensK?: string,
  ) {}

  get presentHeld(): string {
    this.held ??= this.g.op1('Reshape', [this.g.op1('Slice', [this.positionIds, this.g.int64([0, 0]), this.g.int64([1, 1]), this.g.int64([0, 1])]), this.g.int64([1])]);
    return this.held;
  }

  /** [B, 1, 1, C] float: 0 where past position c holds a key of entry b (c < its past length), else -inf (added to the scores: onnxruntime's broadcast Where is slower than Add). */
  pastMask(pastKey: string): string {
    if (this.past) return this.past;
    const g = this.g;
    const length = g.op1('Reshape', [g.op1('Slice', [this.positionIds, g.int64([0]), g.int64([1]), g.int64([1])]), g.int64([-1, 1, 1, 1])]);
    const capacity = g.op1('Squeeze', [g.op1('Shape', [pastKey], { start: 2, end: 3 }), g.int64([0])]);
    const positions = g.op1('Range', [g.int64([0], []), capacity, g.int64([1], [])]);
    this.past = this.additive(g.op1('Less', [positions, length]));
    return this.past;
  }

  /** [2] int64: C and S, the softmax's columns over the past and over the new positions. */
  splitSizes(pastKey: string, newKey: string): string {
    this.split ??= this.g.op1('Concat', [this.g.op1('Shape', [pastKey], { start: 2, end: 3 }), this.g.op1('Shape', [newKey], { start: 1, end: 2 })], { axis: 0 });
    return this.split;
  }

  /** [G*S, S] float: 0 where row g*S + i sees new key j (j ≤ i), else -inf. */
  causalMask(newKey: string, groups: number): string {
    if (this.causal) return this.causal;
    const g = this.g;
    const seq = g.op1('Squeeze', [g.op1('Shape', [newKey], { start: 1, end: 2 }), g.int64([0])]);
    const index = g.op1('Range', [g.int64([0], []), seq, g.int64([1], [])]);
    const seen = g.op1('Not', [g.op1('Greater', [g.op1('Unsqueeze', [index, g.int64([0])]), g.op1('Unsqueeze', [index, g.int64([1])])])]); // [S, S]: j ≤ i
    this.causal = this.additive(groups === 1 ? seen : g.op1('Tile', [seen, g.int64([groups, 1])]));
    return this.causal;
  }

  /**
   * A windowed layer's past mask [B, 1, G*S, C]: 0 where past index c holds a key row i of entry
   * b sees (c < held and (i + held) − c < window: the key's position start − held + c is less
   * than `window` behind the query's start + i), else -inf.
   */
  windowPastMask(pastKey: string, newKey: string, window: number, groups: number): string {
    if (this.windowPast) return this.windowPast;
    const g = this.g;
    const seq = g.op1('Shape', [newKey], { start: 1, end: 2 }); // [1]: S
    // Without seqlens_k_window (a complete-model export) the windowed layer's past is the whole past.
    const heldOf = this.windowSeqlensK === undefined
      ? g.op1('Slice', [this.positionIds, g.int64([0]), g.int64([1]), g.int64([1])])
      : g.op1('Sub', [g.op1('Add', [g.op1('Cast', [this.windowSeqlensK], { to: OnnxType.INT64 }), g.int64([1])]), seq]);
    const held = g.op1('Reshape', [heldOf, g.int64([-1, 1, 1, 1])]); // [B, 1, 1, 1]
    const capacity = g.op1('Squeeze', [g.op1('Shape', [pastKey], { start: 2, end: 3 }), g.int64([0])]);
    const c = g.op1('Range', [g.int64([0], []), capacity, g.int64([1], [])]); // [C]
    const rows = g.op1('Unsqueeze', [g.op1('Range', [g.int64([0], []), g.op1('Squeeze', [seq, g.int64([0])]), g.int64([1], [])]), g.int64([1])]); // [S, 1]
    const behind = g.op1('Sub', [g.op1('Add', [rows, held]), c]); // [B, 1, S, C]: query position − key position
    const valid = g.op1('And', [g.op1('Less', [c, held]), g.op1('Less', [behind, g.int64([window], [])])]);
    const mask = this.additive(valid);
    this.windowPast = groups === 1 ? mask : g.op1('Tile', [mask, g.int64([1, 1, groups, 1])]);
    return this.windowPast;
  }

  /** A windowed layer's [G*S, S] mask over the new keys: 0 where j ≤ i and i − j < window, else -inf. */
  windowCausalMask(newKey: string, window: number, groups: number): string {
    if (this.windowCausal) return this.windowCausal;
    const g = this.g;
    const seq = g.op1('Squeeze', [g.op1('Shape', [newKey], { start: 1, end: 2 }), g.int64([0])]);
    const index = g.op1('Range', [g.int64([0], []), seq, g.int64([1], [])]);
    const behind = g.op1('Sub', [g.op1('Unsqueeze', [index, g.int64([1])]), g.op1('Unsqueeze', [index, g.int64([0])])]); // [S, S]: i − j
    const seen = g.op1('And', [g.op1('Not', [g.op1('Less', [behind, g.int64([0], [])])]), g.op1('Less', [behind, g.int64([window], [])])]);
    this.windowCausal = this.additive(groups === 1 ? seen : g.op1('Tile', [seen, g.int64([groups, 1])]));
    return this.windowCausal;
  }

  /** `splitSizes` of the windowed layers (their past has its own capacity). */
  windowSplitSizes(pastKey: string, newKey: string): string {
    this.windowSplit ??= this.g.op1('Concat', [this.g.op1('Shape', [pastKey], { start: 2, end: 3 }), this.g.op1('Shape', [newKey], { start: 1, end: 2 })], { axis: 0 });
    return this.windowSplit;
  }

  private additive(valid: string): string {
    return this.g.op1('Where', [valid, this.g.float([0], OnnxType.FLOAT, []), this.g.float([-Infinity], OnnxType.FLOAT, [])]);
  }
}

/**
 * One layer's attention. `q` [B, S, H*D] and `newKey` [B, S, kvH*D] after rotary, `newValue`
 * [B, S, kvH*D]; `pastKey` / `pastValue` [B, kvH, C, D]. Returns [B, S, H*D] and names the
 * present outputs `presentKey` / `presentValue`.
 */
export function emitInPlaceAttention(
  g: GraphBuilder,
  shape: AttentionShape,
  masks: InPlaceMasks,
  io: { q: string; newKey: string; newValue: string; pastKey: string; pastValue: string; output: string; presentKey?: string; presentValue?: string },
): string {
  const { numHeads: H, numKvHeads: KVH, headDim: D, scale, window, softcap } = shape;
  const G = H / KVH;
  const t = OnnxType.FLOAT;
  // tanh(s / cap) · cap: the 1 / cap goes into the query's scale, the tanh and · cap after each product.
  const capped = (scores: string) => (softcap === undefined ? scores : g.op1('Mul', [g.op1('Tanh', [scores]), g.float([softcap], t, [])]));
  const perHead = (x: string) => g.op1('Transpose', [g.op1('Reshape', [x, g.int64([0, 0, KVH, D])])], { perm: [0, 2, 1, 3] }); // [B, kvH, S, D]
  const q = g.op1('Reshape', [g.op1('Transpose', [g.op1('Reshape', [io.q, g.int64([0, 0, KVH, G, D])])], { perm: [0, 2, 3, 1, 4] }), g.int64([0, 0, -1, D])]); // [B, kvH, G*S, D]
  const scaled = g.op1('Mul', [q, g.float([softcap === undefined ? scale : scale / softcap], t, [])]);
  const key = perHead(io.newKey);
  const value = perHead(io.newValue);
  const pastScores = capped(g.op1('MatMul', [scaled, g.op1('Transpose', [io.pastKey], { perm: [0, 1, 3, 2] })])); // [B, kvH, G*S, C]
  const newScores = capped(g.op1('MatMul', [scaled, g.op1('Transpose', [key], { perm: [0, 1, 3, 2] })])); // [B, kvH, G*S, S]
  const pastMask = window === undefined ? masks.pastMask(io.pastKey) : masks.windowPastMask(io.pastKey, io.newKey, window, G);
  const newMask = window === undefined ? masks.causalMask(io.newKey, G) : masks.windowCausalMask(io.newKey, window, G);
  const scores = g.op1('Concat', [g.op1('Add', [pastScores, pastMask]), g.op1('Add', [newScores, newMask])], { axis: -1 });
  const probs = g.op1('Softmax', [scores], { axis: -1 });
  const split = window === undefined ? masks.splitSizes(io.pastKey, io.newKey) : masks.windowSplitSizes(io.pastKey, io.newKey);
  const [pPast, pNew] = g.op('Split', [probs, split], { axis: -1 }, { outputs: 2 });
  const heads = g.op1('Add', [g.op1('MatMul', [pPast, io.pastValue]), g.op1('MatMul', [pNew, value])]); // [B, kvH, G*S, D]
  const rows = g.op1('Transpose', [g.op1('Reshape', [heads, g.int64([0, 0, G, -1, D])])], { perm: [0, 3, 1, 2, 4] }); // [B, S, kvH, G, D]
  // The held positions only (a truncated past may have more room than it holds); a pooled run
  // feeds 0: onnxruntime computes every node, fetched or not, and the pool's present is never read.
  const held = (past: string) => g.op1('Slice', [past, g.int64([0]), masks.presentHeld, g.int64([2])]);
  if (io.presentKey) g.op1('Concat', [held(io.pastKey), key], { axis: 2 }, { output: io.presentKey });
  if (io.presentValue) g.op1('Concat', [held(io.pastValue), value], { axis: 2 }, { output: io.presentValue });
  return g.op1('Reshape', [rows, g.int64([0, 0, H * D])], {}, { output: io.output });
}
