/**
 * Sequences' Samplers by handle, inside a worker thread: the sampler worker
 * (sampler-worker-main.ts) and the head worker (head-worker-main.ts, which samples rows beside
 * its LM head). A sequence's calls arrive in order, so its RNG advances as on one thread; the
 * Sampler is the same code as on the main thread, so the same seed gives the same tokens.
 */
import { ConstraintDeadEndError } from '../core/sampling/constraint.ts';
import { sampleChain } from '../core/runtime/head-pick.ts';
import { Sampler } from '../core/sampling/sampler.ts';
import type { SamplingParams, TokenHistory, TokenMask, VerifiedSample } from '../core/sampling/index.ts';
import type { DraftToken } from '../core/sampling/speculative.ts';

/** How a call names its sequence's sampler (and, with its first call, how to build it). */
export interface SamplerCall {
  readonly handle: number;
  /** With the sequence's first call: how to build its Sampler. */
  readonly open?: { readonly params: SamplingParams; readonly vocabSize: number };
  /** Only when a penalty is on (the Sampler reads no history otherwise). */
  readonly history?: TokenHistory;
  readonly draft?: DraftToken;
  readonly mask?: TokenMask;
  /** A pick's drafts (head-pick.ts): its rows are drafts.length + 1, sampled as a chain. */
  readonly drafts?: readonly DraftToken[];
}

/** A worker-side error as plain data (posted back). */
export interface SampleFailure {
  readonly error: { readonly name: string; readonly message: string };
}

export type SampleResult = VerifiedSample | SampleFailure;

export const NO_HISTORY: TokenHistory = { prompt: [], generated: [] };

export function failure(error: unknown): SampleFailure {
  return { error: { name: error instanceof Error ? error.name : 'Error', message: error instanceof Error ? error.message : String(error) } };
}

/** A failure posted back, as the type the sampler's callers know (`where` names the worker). */
export function rebuiltSampleError(error: SampleFailure['error'], where: string): Error {
  if (error.name === 'ConstraintDeadEndError') return new ConstraintDeadEndError();
  if (error.name === 'RangeError') return new RangeError(error.message);
  return new Error(`${where} failed: ${error.message}`);
}

export class SamplerHost {
  private readonly samplers = new Map<number, Sampler>();

  /** `call`'s token from `logits` ([vocab]); a failure (no such sampler, a dead end) as data. */
  run(call: SamplerCall, logits: Float32Array): SampleResult {
    try {
      const sampler = this.sampler(call);
      const history = call.history ?? NO_HISTORY;
      return call.draft ? sampler.verify(logits, history, call.draft, call.mask) : { ...sampler.sample(logits, history, call.mask), accepted: false };
    } catch (error) {
      return failure(error);
    }
  }

  /** A pick's chain over `logits` ([drafts + 1, vocab]): its tokens in row order, or its failure. */
  async runChain(call: SamplerCall, logits: Float32Array): Promise<VerifiedSample[] | SampleFailure> {
    try {
      const sampler = this.sampler(call);
      const vocab = logits.length / ((call.drafts?.length ?? 0) + 1);
      return await sampleChain(sampler, (i) => logits.subarray(i * vocab, (i + 1) * vocab), { history: call.history ?? NO_HISTORY, mask: call.mask, drafts: call.drafts });
    } catch (error) {
      return failure(error);
    }
  }

  private sampler(call: SamplerCall): Sampler {
    let sampler = this.samplers.get(call.handle);
    if (!sampler && call.open) this.samplers.set(call.handle, (sampler = new Sampler(call.open.params, call.open.vocabSize)));
    if (!sampler) throw new Error(`no sampler ${call.handle} (disposed)`);
    return sampler;
  }

  dispose(handles: readonly number[]): void {
    for (const handle of handles) this.samplers.delete(handle);
  }

  get size(): number {
    return this.samplers.size;
  }
}
