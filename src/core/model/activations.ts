/**
 * Activations: the hidden states that travel between the head and the hops. Plain data,
 * shared by the graphs, the executors, the frame codec and the Route Session (a leaf module:
 * it imports nothing).
 */

/** Element type of activations (and of the shard graph's float tensors). */
export type ActivationDtype = 'fp32' | 'fp16';

/** Hidden states of `tokens` consecutive positions: [1, tokens, hiddenSize] row-major. */
export interface Activations {
  readonly dtype: ActivationDtype;
  readonly data: Float32Array | Uint16Array; // Uint16Array holds fp16 bits
  readonly tokens: number;
  readonly hiddenSize: number;
}
