/** Naive float ops of the reference forward pass: float32 storage, float64 accumulation. */

/** Where tensors come from: Hugging Face names, row-major float32. */
export interface TensorSource {
  get(name: string): Float32Array;
}

/** Fetches a tensor and checks its element count, so a wrong config fails loudly, not subtly. */
export function tensor(weights: TensorSource, name: string, elements: number): Float32Array {
  const t = weights.get(name);
  if (t.length !== elements) throw new Error(`tensor ${name} has ${t.length} elements, expected ${elements}`);
  return t;
}

/** y = W x + b with W `[out, in]` row-major. */
export function linear(x: Float32Array, w: Float32Array, out: number, bias?: Float32Array): Float32Array {
  const n = x.length;
  const y = new Float32Array(out);
  for (let o = 0; o < out; o++) {
    let acc = bias ? bias[o] : 0;
    const row = o * n;
    for (let i = 0; i < n; i++) acc += w[row + i] * x[i];
    y[o] = acc;
  }
  return y;
}

/** y = x / sqrt(mean(x^2) + eps) * w. */
export function rmsNorm(x: Float32Array, w: Float32Array, eps: number): Float32Array {
  let sum = 0;
  for (let i = 0; i < x.length; i++) sum += x[i] * x[i];
  const inv = 1 / Math.sqrt(sum / x.length + eps);
  const y = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) y[i] = x[i] * inv * w[i];
  return y;
}

/** RMSNorm of each `headDim` slice of `x`, in place (Qwen3 q_norm / k_norm). */
export function perHeadRmsNorm(x: Float32Array, w: Float32Array, headDim: number, eps: number): void {
  for (let o = 0; o < x.length; o += headDim) x.set(rmsNorm(x.subarray(o, o + headDim), w, eps), o);
}

/**
 * Rotary "rotate half" in place on each head: [x1 cos - x2 sin, x2 cos + x1 sin] over the
 * first `rotaryDim` dimensions (Phi-3's partial rotary; the rest pass through), with cos and
 * sin multiplied by `attentionFactor` (longrope).
 */
export function rotateHalf(x: Float32Array, headDim: number, position: number, invFreq: Float64Array, rotaryDim = headDim, attentionFactor = 1): void {
  const half = rotaryDim / 2;
  for (let o = 0; o < x.length; o += headDim) {
    for (let i = 0; i < half; i++) {
      const angle = Math.fround(position * Math.fround(invFreq[i]));
      const cos = Math.fround(Math.fround(Math.cos(angle)) * attentionFactor); // fp32 tables, as ropeCaches and Hugging Face hold them
      const sin = Math.fround(Math.fround(Math.sin(angle)) * attentionFactor);
      const x1 = x[o + i];
      const x2 = x[o + half + i];
      x[o + i] = x1 * cos - x2 * sin;
      x[o + half + i] = x2 * cos + x1 * sin;
    }
  }
}

/** gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). */
export function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
}

/** tanh(x / cap) * cap (Gemma's softcapping). */
export function softcap(x: number, cap: number): number {
  return Math.tanh(x / cap) * cap;
}
