/**
 * BatchingHeadRunner: the head's LM head for concurrent sessions in one run, below the
 * Route Session (like BatchingLink for the hops). With batched decode the peers serve eight
 * streams for little more than one, so the head's per-session LM head (a [hidden, vocab]
 * matrix read per token, on the SmolLM2 shape about a fifth of the model) would become the
 * bound; folded, it is read once per step for all of them.
 *
 * No timer: a `logits` call made while the head is idle runs at the end of the current turn
 * (`nextTurn`), with every call made in that turn (the sessions one batched answer released);
 * calls made while one is running wait and run together when it returns. Each caller gets
 * its own row.
 */
import { nextTurn } from './next-turn.ts';
import { startBlocksLocally, type HeadBlock, type HeadBlockResult } from './head-pick.ts';
import type { HeadRunner } from './ort-head-runner.ts';
import type { Activations } from './shard-executor.ts';

/** A caller's block (its positions: a speculative step's every verified one; undefined: the last; or a pick). */
interface Waiting {
  readonly block: HeadBlock;
  resolve(result: HeadBlockResult): void;
  reject(error: unknown): void;
}

export class BatchingHeadRunner implements HeadRunner {
  private busy = false;
  private readonly queue: Waiting[] = [];
  private counts = { runs: 0, batchedRows: 0 };

  constructor(
    private readonly inner: HeadRunner,
    private readonly maxRows = 64,
  ) {}

  get device(): string {
    return this.inner.device;
  }

  /** Runs of the LM head, and the rows that shared a run with another. */
  get stats(): { runs: number; batchedRows: number } {
    return { ...this.counts };
  }

  embed(ids: readonly number[]): Promise<Activations> {
    return this.inner.embed(ids);
  }

  async logits(hidden: Activations, rows?: readonly number[]): Promise<Float32Array> {
    return (await this.enqueue({ hidden, rows })) as Float32Array;
  }

  /** Each block joins the run of the turn like a `logits` call; picks run where the inner runner samples. */
  async startBlocks(blocks: readonly HeadBlock[]): Promise<Promise<HeadBlockResult>[]> {
    const results = blocks.map((block) => this.enqueue(block));
    for (const r of results) r.catch(() => undefined); // each is the caller's to await
    return results;
  }

  private enqueue(block: HeadBlock): Promise<HeadBlockResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ block, resolve, reject });
      if (!this.busy) {
        this.busy = true;
        nextTurn(() => void this.drain());
      }
    });
  }

  dispose(): Promise<void> {
    return this.inner.dispose();
  }

  private async drain(): Promise<void> {
    this.busy = true;
    try {
      while (this.queue.length > 0) {
        const taken = this.queue.splice(0, this.maxRows);
        this.counts.runs++;
        try {
          if (taken.length > 1) this.counts.batchedRows += taken.length;
          const blocks = taken.map((w) => w.block);
          // Without a runner that samples beside its logits, the picks are sampled here; the next
          // run does not wait for them.
          const results = await (this.inner.startBlocks ? this.inner.startBlocks(blocks) : startBlocksLocally(this.inner, blocks));
          taken.forEach((w, i) => void results[i].then(w.resolve, w.reject));
        } catch (error) {
          for (const w of taken) w.reject(error);
        }
      }
    } finally {
      this.busy = false;
    }
  }
}
