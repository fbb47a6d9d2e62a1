/**
 * What each decoder layer's attention is, by config: its window, its rotary, its score scale
 * and softcap. Read by the shard graph builder, the KV budgets and (in tests) the reference
 * forward pass, so none decides on its own.
 */
import type { LayerRange, ModelConfig, RopeConfig } from './types.ts';

export interface LayerAttention {
  /** Positions a query sees, itself included (Hugging Face's `sliding_window`); undefined: every earlier position. */
  readonly window?: number;
  /** The layer rotates with `config.localRope` (Gemma 3's sliding layers), not `config.rope`. */
  readonly localRope: boolean;
  readonly rope: RopeConfig;
  /** Scores are `q·k · scale`. */
  readonly scale: number;
  /** Scores become `tanh(s / softcap) · softcap` (Gemma 2). */
  readonly softcap?: number;
}

/** The window of layer `layer`, or undefined when it attends to the whole context. */
export function layerWindow(config: Pick<ModelConfig, 'slidingWindow' | 'slidingLayers'>, layer: number): number | undefined {
  if (config.slidingWindow === undefined) return undefined;
  if (config.slidingLayers !== undefined && config.slidingLayers[layer] !== true) return undefined;
  return config.slidingWindow;
}

export function layerAttention(config: ModelConfig, layer: number): LayerAttention {
  const window = layerWindow(config, layer);
  const localRope = window !== undefined && config.localRope !== undefined;
  const softcap = config.gemma?.attnLogitSoftcap;
  return {
    ...(window !== undefined ? { window } : {}),
    localRope,
    rope: localRope ? config.localRope! : config.rope,
    scale: 1 / Math.sqrt(config.gemma ? config.gemma.queryPreAttnScalar : config.headDim),
    ...(softcap !== undefined ? { softcap } : {}),
  };
}

/** The sliding window of a layer range: its size and the layers (absolute indices) it applies to. */
export interface KvWindow {
  readonly size: number;
  readonly layers: readonly number[];
}

/** The windowed layers of `range`, or undefined when none is (one window per model). */
export function windowedLayers(config: Pick<ModelConfig, 'slidingWindow' | 'slidingLayers'>, range: LayerRange): KvWindow | undefined {
  const layers: number[] = [];
  for (let l = range.start; l < range.end; l++) if (layerWindow(config, l) !== undefined) layers.push(l);
  return layers.length === 0 ? undefined : { size: config.slidingWindow!, layers };
}

/**
 * Positions a windowed layer's KV holds at most between steps: the window less one (what the
 * next query still sees, besides itself) plus a block of room, so it is compacted once per
 * block of steps rather than every step. A step of more positions holds them for its run.
 */
export function windowKvPositions(window: number, block: number): number {
  return window - 1 + block;
}

/**
 * The most bytes one session's KV of `range` holds for a sequence of `positions`: full
 * layers hold every position, windowed layers at most `windowKvPositions` (pool mode).
 */
export function kvBytesBound(config: Pick<ModelConfig, 'slidingWindow' | 'slidingLayers' | 'numKvHeads' | 'headDim'>, range: LayerRange, positions: number, bytesPerValue: number, block: number): number {
  const perPosition = 2 * config.numKvHeads * config.headDim * bytesPerValue;
  let total = 0;
  for (let l = range.start; l < range.end; l++) {
    const window = layerWindow(config, l);
    total += perPosition * (window === undefined ? positions : Math.min(positions, windowKvPositions(window, block)));
  }
  return total;
}
