/**
 * When generation ends: stop token ids and the token budget (StopChecker), and text stop strings
 * that must never reach the client, even split across streamed deltas (StopStringMatcher).
 */

import { SamplingParamError } from './params.ts';

/** OpenAI finish reasons: a stop token or stop string was hit, or the token budget ran out. */
export type FinishReason = 'stop' | 'length';

/** Decides, after each generated token, whether the sequence is finished. Stateless. */
export class StopChecker {
  private readonly stopIds: ReadonlySet<number>;
  private readonly maxTokens: number;

  /** Takes the matching fields of `SamplingParams` (already validated). */
  constructor(options: { readonly stopTokenIds: readonly number[]; readonly maxTokens: number }) {
    this.stopIds = new Set(options.stopTokenIds);
    this.maxTokens = options.maxTokens;
  }

  /**
   * `tokenId` was just generated and `generatedCount` tokens (including it) exist now.
   * Returns 'stop' if it is a stop id (its text should not be emitted), else 'length' once
   * `generatedCount` ≥ maxTokens (this token is emitted), else undefined. 'stop' wins a tie.
   */
  check(tokenId: number, generatedCount: number): FinishReason | undefined {
    if (this.stopIds.has(tokenId)) return 'stop';
    if (generatedCount >= this.maxTokens) return 'length';
    return undefined;
  }
}

/** What `StopStringMatcher.push` releases. */
export interface StopMatch {
  /** Text safe to send to the client now (may be empty). */
  readonly emit: string;
  /** A stop string was found; `emit` ends just before it and nothing follows. */
  readonly stopped: boolean;
}

/**
 * Streams text while watching for stop strings (OpenAI `stop`). Text that could still be the
 * beginning of a stop string is held back until it either completes a stop string (dropped, with
 * everything after it) or stops matching (released on a later push, or by `flush`).
 *
 * Guarantee: the concatenation of every `emit` plus `flush()` equals the full text cut just before
 * the earliest occurrence of any stop string (or the full text if none occurs), however the text
 * was split into deltas. At most (longest stop string − 1) UTF-16 units are held at a time.
 */
export class StopStringMatcher {
  private readonly stops: readonly string[];
  private held = '';
  private done = false;

  /** Throws SamplingParamError (field 'stop') for an empty stop string. No strings: passthrough. */
  constructor(stops: readonly string[]) {
    stops.forEach((stop, i) => {
      if (typeof stop !== 'string' || stop.length === 0) {
        throw new SamplingParamError(`stop[${i}]`, 'stop strings must be non-empty strings');
      }
    });
    this.stops = [...new Set(stops)];
  }

  /** True once a stop string has been seen; later pushes emit nothing. */
  get stopped(): boolean {
    return this.done;
  }

  /** Feeds the next decoded text delta. */
  push(delta: string): StopMatch {
    if (this.done) return { emit: '', stopped: true };
    const text = this.held + delta;
    let cut = -1;
    for (const stop of this.stops) {
      const at = text.indexOf(stop);
      if (at >= 0 && (cut < 0 || at < cut)) cut = at;
    }
    if (cut >= 0) {
      this.done = true;
      this.held = '';
      return { emit: text.slice(0, cut), stopped: true };
    }
    const keep = this.heldSuffixLength(text);
    this.held = text.slice(text.length - keep);
    return { emit: text.slice(0, text.length - keep), stopped: false };
  }

  /** End of generation: releases held text (it can no longer become a stop string). */
  flush(): string {
    const rest = this.done ? '' : this.held;
    this.held = '';
    return rest;
  }

  /** Length of the longest suffix of `text` that is a proper prefix of some stop string. */
  private heldSuffixLength(text: string): number {
    let longest = 0;
    for (const stop of this.stops) {
      const limit = Math.min(stop.length - 1, text.length);
      for (let len = limit; len > longest; len--) {
        if (text.endsWith(stop.slice(0, len))) {
          longest = len;
          break;
        }
      }
    }
    return longest;
  }
}
