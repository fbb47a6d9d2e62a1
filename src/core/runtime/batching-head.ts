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
import type { HeadRunner } from './ort-head-runner.ts';
import type { Activations } from './shard-executor.ts';

interface Waiting {
  readonly hidden: Activations;
  /** The positions asked for (a speculative step's every verified one); undefined: the last. */
  readonly rows?: readonly number[];
  resolve(logits: Float32Array): void;
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

  logits(hidden: Activations, rows?: readonly number[]): Promise<Float32Array> {
    return new Promise((resolve, reject) => {
      this.queue.push({ hidden, rows, resolve, reject });
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
          if (taken.length === 1 || !this.inner.logitsBatch) {
            for (const w of taken) w.resolve(await this.inner.logits(w.hidden, w.rows));
          } else {
            this.counts.batchedRows += taken.length;
            const rows = await this.inner.logitsBatch(taken.map((w) => w.hidden), taken.map((w) => w.rows));
            taken.forEach((w, i) => w.resolve(rows[i]));
          }
        } catch (error) {
          for (const w of taken) w.reject(error);
        }
      }
    } finally {
      this.busy = false;
    }
  }
}
