/**
 * Rotary position embedding tables, shared by the shard graph (cos/sin caches) and the
 * pure-TypeScript reference forward pass. Hugging Face "rotate half" layout: dimension i
 * pairs with i + headDim/2.
 */
import type { RopeConfig } from './types.ts';
import { yarnInverseFrequencies } from './moe/yarn.ts';

/** Inverse frequencies `[headDim / 2]`, with `llama3` scaling applied when configured. */
export function ropeInverseFrequencies(rope: RopeConfig, headDim: number): Float64Array {
  if (rope.yarn) return yarnInverseFrequencies(rope.theta, headDim, rope.yarn);
  const half = headDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / Math.pow(rope.theta, (2 * i) / headDim);
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

/** cos and sin caches, each `[positions, headDim / 2]` row-major, as float32. */
export function ropeCaches(rope: RopeConfig, headDim: number, positions: number): { cos: Float32Array; sin: Float32Array } {
  const inv = ropeInverseFrequencies(rope, headDim);
  const half = headDim / 2;
  const cos = new Float32Array(positions * half);
  const sin = new Float32Array(positions * half);
  const scale = rope.yarn?.attentionFactor ?? 1; // YaRN scales cos and sin (in float32, as Hugging Face)
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      // Angle in float32 like Hugging Face (position * inv_freq computed in fp32).
      const angle = Math.fround(p * Math.fround(inv[i]));
      cos[p * half + i] = scale === 1 ? Math.cos(angle) : Math.fround(Math.cos(angle)) * Math.fround(scale);
      sin[p * half + i] = scale === 1 ? Math.sin(angle) : Math.fround(Math.sin(angle)) * Math.fround(scale);
    }
  }
  return { cos, sin };
}
