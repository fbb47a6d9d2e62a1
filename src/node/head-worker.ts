/**
 * The head's own onnxruntime sessions (embedding, final norm + LM head) in a worker thread.
 * onnxruntime-node's `run` executes the native run synchronously on the calling JS thread
 * (its backend only defers it with setImmediate), so on the main thread one 16-row LM-head
 * run at a 151,936-token vocabulary holds the event loop for its whole length (measured
 * 3–84 ms on this 2-core machine). Here the same OrtHeadRunner runs in a worker
 * (head-worker-main.ts) behind the HeadRunner seam: the main thread sends hidden states and
 * gets the logits back in a transferred buffer (no copy). BatchingHeadRunner above it still
 * folds one turn's calls into one `logitsBatch`, so a step of N sessions is one message each
 * way.
 */
import { Worker } from 'node:worker_threads';
import type { ActivationDtype } from '../core/model/activations.ts';
import type { WeightSpec } from '../core/model/quant/weight-format.ts';
import type { HeadRunner } from '../core/runtime/ort-head-runner.ts';
import type { Activations } from '../core/runtime/shard-executor.ts';
import { FROM_SOURCES } from './package-files.ts';

const WORKER_ENTRY = new URL(FROM_SOURCES ? './head-worker.mjs' : './head-worker-main.js', import.meta.url);

export interface HeadWorkerData {
  readonly modelDir: string;
  readonly device: string;
  readonly dtype: ActivationDtype;
  readonly weights: WeightSpec;
  readonly threads?: number;
}

export type HeadWorkerRequest =
  | { readonly id: number; readonly op: 'embed'; readonly ids: readonly number[] }
  | { readonly id: number; readonly op: 'logits'; readonly hiddens: readonly Activations[]; readonly rows: readonly (readonly number[] | undefined)[] }
  | { readonly id: number; readonly op: 'dispose' };

interface Failure {
  readonly name: string;
  readonly message: string;
}

export interface HeadWorkerReply {
  readonly id?: number;
  readonly ready?: { readonly device: string };
  readonly loadError?: Failure;
  readonly embedded?: Activations;
  /** Every block's rows, one after another; `counts[b]` values belong to block b. */
  readonly logits?: Float32Array;
  readonly counts?: readonly number[];
  readonly error?: Failure;
}

/** The worker-side error as the type the head's callers know. */
function rebuilt(error: Failure): Error {
  if (error.name === 'RangeError') return new RangeError(error.message);
  return new Error(`the head worker failed: ${error.message}`);
}

export class WorkerHeadRunner implements HeadRunner {
  private readonly pending = new Map<number, { resolve(reply: HeadWorkerReply): void; reject(error: Error): void }>();
  private nextId = 1;
  private exited: Error | undefined;

  private constructor(
    private readonly worker: Worker,
    readonly device: string,
  ) {
    worker.on('message', (reply: HeadWorkerReply) => {
      const waiting = reply.id === undefined ? undefined : this.pending.get(reply.id);
      if (!waiting) return;
      this.pending.delete(reply.id!);
      if (reply.error) waiting.reject(rebuilt(reply.error));
      else waiting.resolve(reply);
    });
    const fail = (error: Error) => {
      this.exited ??= error;
      for (const waiting of this.pending.values()) waiting.reject(this.exited);
      this.pending.clear();
    };
    worker.on('error', (error) => fail(new Error(`the head worker failed: ${error.message}`)));
    worker.on('exit', (code) => fail(new Error(`the head worker exited (code ${code})`)));
  }

  /** Starts the worker and waits for its sessions; rejects with the worker's load error. */
  static start(data: HeadWorkerData): Promise<WorkerHeadRunner> {
    const worker = new Worker(WORKER_ENTRY, { workerData: data });
    worker.unref(); // a head that is never closed does not keep the process alive
    return new Promise((resolve, reject) => {
      const onExit = (code: number) => reject(new Error(`the head worker exited (code ${code}) before it loaded`));
      worker.once('error', reject);
      worker.once('exit', onExit);
      worker.once('message', (reply: HeadWorkerReply) => {
        worker.off('error', reject);
        worker.off('exit', onExit);
        if (reply.ready) return resolve(new WorkerHeadRunner(worker, reply.ready.device));
        void worker.terminate();
        reject(reply.loadError ? rebuilt(reply.loadError) : new Error('the head worker answered before it loaded'));
      });
    });
  }

  async embed(ids: readonly number[]): Promise<Activations> {
    const reply = await this.call({ id: this.nextId++, op: 'embed', ids: [...ids] });
    return reply.embedded!;
  }

  async logits(hidden: Activations, rows?: readonly number[]): Promise<Float32Array> {
    return (await this.logitsBatch([hidden], [rows]))[0];
  }

  async logitsBatch(hiddens: readonly Activations[], rows: readonly (readonly number[] | undefined)[] = []): Promise<Float32Array[]> {
    // The hidden states are copied (structured clone): the caller's buffers stay its own.
    const plain = hiddens.map((h) => ({ dtype: h.dtype, data: h.data, tokens: h.tokens, hiddenSize: h.hiddenSize }));
    const reply = await this.call({ id: this.nextId++, op: 'logits', hiddens: plain, rows: hiddens.map((_, b) => rows[b]) });
    const out = reply.logits!;
    let from = 0;
    return reply.counts!.map((n) => out.subarray(from, (from += n)));
  }

  async dispose(): Promise<void> {
    if (!this.exited) await this.call({ id: this.nextId++, op: 'dispose' }).catch(() => undefined);
    await this.worker.terminate();
  }

  private call(request: HeadWorkerRequest): Promise<HeadWorkerReply> {
    if (this.exited) return Promise.reject(this.exited);
    return new Promise((resolve, reject) => {
      this.pending.set(request.id, { resolve, reject });
      this.worker.postMessage(request);
    });
  }
}
