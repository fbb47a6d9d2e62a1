/**
 * Seeded pseudo-random numbers for sampling.
 *
 * Generator: xoshiro128** 1.1 (Blackman & Vigna), 128-bit state, period 2^128 − 1.
 * Seeding: the seed's 64-bit two's-complement halves each drive a splitmix32-style stream; the
 * two streams are XORed into the four state words.
 *
 * Only 32-bit integer arithmetic (`Math.imul`, `>>>`, `^`, `<<`) is used, so the same seed gives
 * the same sequence on every JavaScript runtime (Node, browsers, workers), whichever peer samples.
 */

/** The four 32-bit state words; pass to {@link restoreRng} to continue the same sequence. */
export type RngState = readonly [number, number, number, number];

/** A deterministic source of uniform numbers. Not safe for cryptography. */
export interface Rng {
  /** Uniform in [0, 1), 32 bits of resolution (a multiple of 2^-32). */
  next(): number;
  /** Uniform unsigned 32-bit integer in [0, 2^32). */
  nextUint32(): number;
  /** A snapshot of the state; the generator keeps running independently of it. */
  state(): RngState;
}

const GOLDEN = 0x9e3779b9;
const TWO_POW_32 = 4294967296;

/** Bijective 32-bit finalizer (lowbias32 constants). Returns an unsigned 32-bit integer. */
function mix32(x: number): number {
  let z = x | 0;
  z = Math.imul(z ^ (z >>> 16), 0x21f0aaad);
  z = Math.imul(z ^ (z >>> 15), 0x735a2d97);
  return (z ^ (z >>> 15)) >>> 0;
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

class Xoshiro128StarStar implements Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor(state: RngState) {
    [this.s0, this.s1, this.s2, this.s3] = state.map((word) => word | 0);
  }

  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  next(): number {
    return this.nextUint32() / TWO_POW_32;
  }

  state(): RngState {
    return [this.s0 >>> 0, this.s1 >>> 0, this.s2 >>> 0, this.s3 >>> 0];
  }
}

/**
 * A generator seeded from `seed`, which must be a safe integer (negative allowed; it is read as
 * 64-bit two's complement). Throws RangeError otherwise.
 */
export function createRng(seed: number): Rng {
  if (!Number.isSafeInteger(seed)) {
    throw new RangeError(`RNG seed must be a safe integer, got ${seed}`);
  }
  const low = seed >>> 0;
  const high = Math.floor(seed / TWO_POW_32) >>> 0;
  const words: [number, number, number, number] = [0, 0, 0, 0];
  let a = low;
  let b = high ^ 0x6a09e667;
  for (let i = 0; i < 4; i++) {
    a = (a + GOLDEN) | 0;
    b = (b + 0x7f4a7c15) | 0;
    words[i] = (mix32(a) ^ mix32(b ^ 0x5bd1e995)) >>> 0;
  }
  // xoshiro must not start from the all-zero state; astronomically unlikely, but cheap to rule out.
  if ((words[0] | words[1] | words[2] | words[3]) === 0) words[0] = 1;
  return new Xoshiro128StarStar(words);
}

/**
 * A generator continuing from a snapshot taken with {@link Rng.state}. Each word must be an
 * integer in [0, 2^32) and not all may be zero; throws RangeError otherwise.
 */
export function restoreRng(state: RngState): Rng {
  if (
    state.length !== 4 ||
    !state.every((word) => Number.isInteger(word) && word >= 0 && word < TWO_POW_32)
  ) {
    throw new RangeError('RNG state must be four unsigned 32-bit integers');
  }
  if (state.every((word) => word === 0)) {
    throw new RangeError('RNG state must not be all zero');
  }
  return new Xoshiro128StarStar(state);
}
