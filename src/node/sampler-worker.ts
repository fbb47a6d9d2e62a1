/**
 * The head's samplers in a worker thread. Drawing a token at temperature > 0 (or with
 * penalties, logprobs or a grammar mask) is a few passes over the logits, one of them exp()
 * per token of the vocabulary: 1.5–3 ms at 151,936 tokens, for every stream at every step. On
 * the main thread the sessions a batched LM-head run releases sample one after the other in
 * one turn, holding the event loop (`npm run bench:event-loop`: p99 138 ms with 16 streams).
 * Here each sequence's Sampler (its seeded RNG, its scratch) lives in one worker
 * (sampler-worker-main.ts) — the same code, so the same seed gives the same tokens — and the
 * main thread sends it a copy of the sequence's logits row.
 *
 * The calls made in one turn travel as one message, and their answers come back as one, so
 * the sessions one LM-head run released continue together in one turn and their next steps
 * still leave in one batched frame (BatchingLink). Each sequence's sampler is a ChannelSampler
 * (channel-sampler.ts): greedy sampling without penalties, logprobs or a mask is one argmax pass
 * with no state and stays on the calling thread (no copy).
 */
import { Worker } from 'node:worker_threads';
import { validateSamplingParams, type SamplerFactory, type VerifiedSample } from '../core/sampling/index.ts';
import { nextTurn } from '../core/runtime/next-turn.ts';
import { ChannelSampler, type SamplerChannel } from './channel-sampler.ts';
import { FROM_SOURCES } from './package-files.ts';
import { rebuiltSampleError, type SampleResult, type SamplerCall } from './sampler-host.ts';

const WORKER_ENTRY = new URL(FROM_SOURCES ? './sampler-worker.mjs' : './sampler-worker-main.js', import.meta.url);

/** One sampling call, as the worker gets it: a sampler call and a copy of its row. */
export interface SampleJob extends SamplerCall {
  readonly logits: Float32Array;
}

export interface SamplerWorkerRequest {
  readonly jobs: readonly SampleJob[];
  /** Sequences that ended. */
  readonly dispose: readonly number[];
}

export interface SamplerWorkerReply {
  readonly results: readonly SampleResult[];
  /** The jobs' logits buffers, handed back for the next copies (no allocation per token). */
  readonly buffers: readonly ArrayBuffer[];
}

/** Spare row buffers kept for reuse, per vocabulary size (enough for a step of 64 sessions). */
const MAX_SPARE_BUFFERS = 64;

interface Pending {
  readonly job: SampleJob;
  resolve(result: VerifiedSample): void;
  reject(error: unknown): void;
}

/** The head's one sampler worker; `factory` makes its sequences' samplers. Started on first use. */
export class SamplerWorker implements SamplerChannel {
  private worker: Worker | undefined;
  private queue: Pending[] = [];
  private disposals: number[] = [];
  private scheduled = false;
  /** Batches sent and not answered yet, in order (the worker answers in order). */
  private readonly inFlight: Pending[][] = [];
  private nextHandle = 1;
  private closed = false;
  private counts = { batches: 0, jobs: 0 };
  /** Row buffers back from the worker, by length. */
  private readonly spare = new Map<number, Float32Array[]>();

  /** Batches sent, and the calls they carried. */
  get stats(): { batches: number; jobs: number } {
    return { ...this.counts };
  }

  readonly factory: SamplerFactory = (params, vocabSize) => {
    const valid = validateSamplingParams(params); // refused here, at once, as a local Sampler would
    if (!Number.isSafeInteger(vocabSize) || vocabSize < 1) throw new RangeError(`vocabSize must be a positive integer, got ${vocabSize}`);
    return new ChannelSampler(this, this.nextHandle++, valid, vocabSize);
  };

  /** Queues one call; it leaves with every other call made in this turn. */
  submit(job: SampleJob): Promise<VerifiedSample> {
    if (this.closed) return Promise.reject(new Error('the sampler worker is closed'));
    return new Promise((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      this.schedule();
    });
  }

  /** Queues `call` with a copy of `row` (in a buffer the worker handed back: transferred, and it comes back). */
  sample(call: SamplerCall, row: Float32Array): Promise<VerifiedSample> {
    return this.submit({ ...call, logits: this.copyOf(row) });
  }

  /** A copy of `row` in a buffer the worker handed back, or a new one. */
  private copyOf(row: Float32Array): Float32Array {
    const copy = this.spare.get(row.length)?.pop() ?? new Float32Array(row.length);
    copy.set(row);
    return copy;
  }

  /** Frees a sequence's Sampler in the worker (its sampler calls this only once it opened one). */
  release(handle: number): void {
    if (this.closed) return;
    this.disposals.push(handle);
    this.schedule();
  }

  close(): Promise<void> {
    this.closed = true;
    const error = new Error('the sampler worker is closed');
    for (const p of [...this.queue, ...this.inFlight.flat()]) p.reject(error);
    this.queue = [];
    this.inFlight.length = 0;
    return this.worker?.terminate().then(() => undefined) ?? Promise.resolve();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    nextTurn(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    if (this.closed) return;
    const batch = this.queue;
    const dispose = this.disposals;
    this.queue = [];
    this.disposals = [];
    if (batch.length === 0 && dispose.length === 0) return;
    const request: SamplerWorkerRequest = { jobs: batch.map((p) => p.job), dispose };
    const transfer = batch.flatMap((p) => [p.job.logits.buffer as ArrayBuffer, ...(p.job.mask ? [p.job.mask.buffer as ArrayBuffer] : [])]);
    if (batch.length > 0) {
      this.inFlight.push(batch);
      this.counts.batches++;
      this.counts.jobs += batch.length;
    }
    this.started().postMessage(request, transfer);
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const worker = (this.worker = new Worker(WORKER_ENTRY));
    worker.unref();
    worker.on('message', (reply: SamplerWorkerReply) => {
      for (const buffer of reply.buffers) {
        const row = new Float32Array(buffer);
        const list = this.spare.get(row.length) ?? this.spare.set(row.length, []).get(row.length)!;
        if (list.length < MAX_SPARE_BUFFERS) list.push(row);
      }
      const batch = this.inFlight.shift();
      if (!batch) return;
      batch.forEach((p, i) => {
        const result = reply.results[i];
        if ('error' in result) p.reject(rebuiltSampleError(result.error, 'the sampler worker'));
        else p.resolve(result);
      });
    });
    const fail = (error: Error) => {
      for (const p of this.inFlight.flat()) p.reject(error);
      this.inFlight.length = 0;
      // The next call starts a new worker; a sequence opened in this one finds no sampler there
      // (its RNG and scratch went with it) and fails with that error.
      this.worker = undefined;
    };
    worker.on('error', (error) => fail(new Error(`the sampler worker failed: ${error.message}`)));
    worker.on('exit', (code) => {
      if (this.worker === worker) fail(new Error(`the sampler worker exited (code ${code})`));
    });
    return worker;
  }
}
