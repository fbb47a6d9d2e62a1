/**
 * A small draft model the head runs itself (`--draft-model`): its embedding and LM head on
 * the head (a HeadRunner), all its layers behind a PeerLink to a ShardService (a worker
 * thread on the head, in-process in tests), under the session's own id. It must share the
 * model's tokenizer (the node side checks the vocabularies before it is used).
 *
 * Per session it keeps the tokens whose KV its layers hold. Each `draft` call feeds what the
 * context adds beyond the longest prefix they share (a frame that starts below the KV's
 * length drops the rest: the peer's position rule), then guesses k tokens one position at a
 * time. Greedy requests draft greedily (a sure guess, q a point mass); sampled ones draw each
 * guess from the draft model's own distribution under the request's temperature and filters,
 * with an RNG of its own seeded from the request's seed, and hand that distribution on as q.
 */
import { decodeFrame, encodeFrame } from '../frames/frame-codec.ts';
import type { LayerRange } from '../model/types.ts';
import type { HeadRunner } from '../runtime/ort-head-runner.ts';
import type { PeerLink } from '../runtime/peer-link.ts';
import type { Activations } from '../runtime/shard-executor.ts';
import { createRng, selectCandidates, type DraftToken, type Rng, type SamplingParams } from '../sampling/index.ts';
import type { Drafter } from './drafter.ts';

/** A draft model as the head holds it. */
export interface DraftModel {
  readonly head: HeadRunner;
  /** A link to a ShardService that holds `range`: every layer of the draft model. */
  readonly link: PeerLink;
  readonly range: LayerRange;
  readonly vocabSize: number;
}

/** Mixes the request's seed into the draft RNG's, so drafts and the sampler draw independent streams. */
const DRAFT_SEED_SALT = 0x5eed_d4af;

export class ModelDrafter implements Drafter {
  private fed: number[] = []; // tokens whose KV the draft model holds, positions [0, fed.length)
  private readonly rng: Rng | undefined;
  private closed = false;

  constructor(
    private readonly model: DraftModel,
    private readonly sessionId: string,
    private readonly params: SamplingParams,
  ) {
    if (params.temperature > 0) this.rng = createRng(((params.seed ?? Math.floor(Math.random() * 2 ** 32)) ^ DRAFT_SEED_SALT) >>> 0);
  }

  async draft(context: readonly number[], k: number, signal?: AbortSignal): Promise<DraftToken[]> {
    if (k < 1 || context.length === 0 || this.closed) return [];
    // Keep the KV of the shared prefix, but feed at least the last token: its logits guess the next.
    let keep = 0;
    const limit = Math.min(this.fed.length, context.length - 1);
    while (keep < limit && this.fed[keep] === context[keep]) keep++;
    let hidden = await this.run(context.slice(keep), keep, signal);
    this.fed = context.slice();
    const drafts: DraftToken[] = [];
    for (let i = 0; i < k; i++) {
      const guess = this.guess(await this.model.head.logits(hidden));
      drafts.push(guess);
      if (i === k - 1) break;
      hidden = await this.run([guess.tokenId], this.fed.length, signal);
      this.fed.push(guess.tokenId);
    }
    return drafts;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.model.link.control({ kind: 'release', sessionId: this.sessionId }).catch(() => undefined);
  }

  private guess(logits: Float32Array): DraftToken {
    if (!this.rng) {
      let best = 0;
      for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
      return { tokenId: best };
    }
    const set = selectCandidates(Float64Array.from(logits), this.params);
    const ids = set.ids.slice(0, set.count);
    const probs = set.probs.slice(0, set.count);
    const r = this.rng.next();
    let cumulative = 0;
    let tokenId = ids[set.count - 1];
    for (let i = 0; i < set.count; i++) {
      cumulative += probs[i];
      if (r < cumulative && probs[i] > 0) {
        tokenId = ids[i];
        break;
      }
    }
    return { tokenId, q: { ids, probs } };
  }

  /** Positions `position…` of `tokens` through the draft model's layers; their last hidden states. */
  private async run(tokens: readonly number[], position: number, signal?: AbortSignal): Promise<Activations> {
    const activations = await this.model.head.embed(tokens);
    const frame = encodeFrame({ kind: position === 0 ? 'prefill' : 'decode', requestId: 0, sessionId: this.sessionId, startPosition: position, range: this.model.range, activations });
    const answer = decodeFrame(await this.model.link.request(frame, signal));
    if (answer.activations.tokens !== tokens.length) throw new Error(`the draft model answered ${answer.activations.tokens} positions for ${tokens.length}`);
    return answer.activations;
  }
}
