/**
 * What each decoder layer's attention is, by config: its window, its rotary, its score scale
 * and softcap. Read by the shard graph builder, the KV budgets and (in tests) the reference
 * forward pass, so none decides on its own.
 */
import type { ModelConfig, RopeConfig } from './types.ts';

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
