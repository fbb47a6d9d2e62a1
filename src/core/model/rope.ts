/**
 * Rotary position embedding tables, shared by the shard graph (cos/sin caches) and the
 * pure-TypeScript reference forward pass. Hugging Face "rotate half" layout: dimension i
 * pairs with i + headDim/2.
 */
import type { RopeConfig } from './types.ts';
import { yarnInverseFrequencies } from './moe/yarn.ts';

/** Which of longrope's factor lists: `short` up to its original length, `long` beyond. */
export type RopeFactors = 'short' | 'long';

/**
 * Inverse frequencies `[headDim / 2]` (`headDim`: the rotated dimensions), with `llama3`,
 * `linear` or `longrope` scaling applied when configured.
 */
export function ropeInverseFrequencies(rope: RopeConfig, headDim: number, factors: RopeFactors = 'short'): Float64Array {
  if (rope.yarn) return yarnInverseFrequencies(rope.theta, headDim, rope.yarn); // gpt-oss, moe/yarn.ts
  const half = headDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / Math.pow(rope.theta, (2 * i) / headDim);
  if (rope.linearFactor !== undefined) for (let i = 0; i < half; i++) inv[i] /= rope.linearFactor;
  if (rope.longrope) {
    const divisors = factors === 'long' ? rope.longrope.longFactor : rope.longrope.shortFactor;
    for (let i = 0; i < half; i++) inv[i] = 1 / (divisors[i] * Math.pow(rope.theta, (2 * i) / headDim));
  }
  const scaling = rope.llama3;
  if (!scaling) return inv;
  const { factor, lowFreqFactor, highFreqFactor, originalMaxPositionEmbeddings: oldContext } = scaling;
  const lowFreqWavelen = oldContext / lowFreqFactor;
  const highFreqWavelen = oldContext / highFreqFactor;
  for (let i = 0; i < half; i++) {
    const wavelen = (2 * Math.PI) / inv[i];
    if (wavelen < highFreqWavelen) continue;
    if (wavelen > lowFreqWavelen) {
      inv[i] /= factor;
    } else {
      const smooth = (oldContext / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
      inv[i] = (1 - smooth) * (inv[i] / factor) + smooth * inv[i];
    }
  }
  return inv;
}

/** The factor cos and sin are multiplied by (longrope's or YaRN's attention factor; 1 otherwise). */
export function ropeAttentionFactor(rope: RopeConfig): number {
  return rope.longrope?.attentionFactor ?? rope.yarn?.attentionFactor ?? 1;
}

/** cos and sin caches, each `[positions, headDim / 2]` row-major, as float32. */
export function ropeCaches(rope: RopeConfig, headDim: number, positions: number, factors: RopeFactors = 'short'): { cos: Float32Array; sin: Float32Array } {
  const inv = ropeInverseFrequencies(rope, headDim, factors);
  const scale = ropeAttentionFactor(rope);
  const half = headDim / 2;
  const cos = new Float32Array(positions * half);
  const sin = new Float32Array(positions * half);
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      // Angle in float32 like Hugging Face (position * inv_freq computed in fp32).
      const angle = Math.fround(p * Math.fround(inv[i]));
      cos[p * half + i] = Math.fround(Math.cos(angle)) * scale;
      sin[p * half + i] = Math.fround(Math.sin(angle)) * scale;
    }
  }
  return { cos, sin };
}
