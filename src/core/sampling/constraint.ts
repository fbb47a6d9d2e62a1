/**
 * Token constraints: what the sampler consults, at every step, to learn which tokens it may
 * choose (grammar-constrained sampling: JSON mode, JSON schema, tool-call syntax).
 *
 * A constraint is a per-sequence state machine over token ids. The session asks it for the
 * mask of the next step, the sampler draws only among allowed tokens, and the session tells
 * the constraint which token was chosen. `rollback` and `fork` let speculative decoding
 * (verify drafted tokens, then undo the rejected ones) and batching (one state per sequence)
 * drive the same object; nothing in it knows about HTTP or the route.
 */

/**
 * Allowed tokens of one step as a bitmask: bit `id & 31` of word `id >> 5` is 1 when token
 * `id` may be chosen. Length ⌈vocab / 32⌉ (at least); ids past the vocabulary are ignored.
 * This is xgrammar's layout (and vLLM's / llama.cpp's), so masks pass through without copying.
 */
export type TokenMask = Int32Array;

/** Which tokens the next step may take, for one sequence. Not shared between sequences. */
export interface TokenConstraint {
  /**
   * The mask for the next token, or undefined when every token is allowed (no constraint in
   * force at this step, e.g. free text before a tool call begins). The array belongs to the
   * caller. Async so a constraint may live behind a worker or a WebAssembly module.
   */
  nextMask(): Promise<TokenMask | undefined>;
  /**
   * Advances by the chosen token. Throws {@link ConstraintViolationError} when the token is
   * not allowed (the state is then unchanged).
   */
  accept(tokenId: number): void;
  /** Undoes the last `tokens` accepted tokens (≤ the number accepted). */
  rollback(tokens: number): void;
  /** An independent copy in the same state (a second sequence continuing from here). */
  fork(): Promise<TokenConstraint>;
  /** True once the constraint reached its end by accepting a stop token. */
  readonly finished: boolean;
  /** Frees the state (WebAssembly memory). Calls after it throw. Idempotent. */
  dispose(): void;
}

/** The sampled token was not allowed by the constraint: a bug in the sampler or the mask. */
export class ConstraintViolationError extends Error {
  override readonly name = 'ConstraintViolationError';
  readonly code = 'constraint_violation';
  constructor(readonly tokenId: number, detail = 'the grammar does not allow it here') {
    super(`token ${tokenId} was rejected by the output constraint: ${detail}`);
  }
}

/**
 * No token of the model's vocabulary may come next: the grammar needs text this vocabulary
 * cannot spell (a word-level vocabulary asked for JSON). The request cannot be honoured on
 * this model; byte-level vocabularies spell anything and never meet it.
 */
export class ConstraintDeadEndError extends Error {
  override readonly name = 'ConstraintDeadEndError';
  readonly code = 'constraint_dead_end';
  constructor() {
    super("no token of this model's vocabulary can continue the requested output format");
  }
}

/** True when `mask` allows at least one of the tokens `[0, vocabSize)`. */
export function maskAllowsAny(mask: TokenMask, vocabSize: number): boolean {
  const words = Math.min(mask.length, (vocabSize + 31) >>> 5);
  for (let w = 0; w < words; w++) {
    const bits = w === words - 1 && vocabSize % 32 !== 0 ? mask[w] & ((1 << (vocabSize % 32)) - 1) : mask[w];
    if (bits !== 0) return true;
  }
  return false;
}

/** True when `mask` allows `tokenId`. */
export function maskAllows(mask: TokenMask, tokenId: number): boolean {
  return ((mask[tokenId >>> 5] >>> (tokenId & 31)) & 1) === 1;
}

/**
 * Sets every logit the mask forbids to -Infinity, in place ([vocab]). Words that allow all 32
 * tokens are skipped, so the cost is one pass over ⌈vocab / 32⌉ words plus the bits of mixed
 * ones. Throws RangeError when the mask is shorter than the vocabulary needs.
 */
export function applyTokenMask(logits: Float64Array, mask: TokenMask): Float64Array {
  const vocabSize = logits.length;
  const words = (vocabSize + 31) >>> 5;
  if (mask.length < words) {
    throw new RangeError(`token mask has ${mask.length} words, the vocabulary of ${vocabSize} needs ${words}`);
  }
  for (let w = 0; w < words; w++) {
    const bits = mask[w];
    if (bits === -1) continue; // all 32 allowed
    const base = w << 5;
    const end = Math.min(32, vocabSize - base);
    if (bits === 0) {
      for (let b = 0; b < end; b++) logits[base + b] = -Infinity;
      continue;
    }
    for (let b = 0; b < end; b++) if (((bits >>> b) & 1) === 0) logits[base + b] = -Infinity;
  }
  return logits;
}
