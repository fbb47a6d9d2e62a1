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
import { validateSamplingParams, type SamplerFactory, type VerifiedSample } from '../core/sampling/index.ts';
import { checkPickedBlock, pickHere, type HeadBlock, type HeadBlockResult } from '../core/runtime/head-pick.ts';
import type { HeadRunner } from '../core/runtime/ort-head-runner.ts';
import type { Activations } from '../core/runtime/shard-executor.ts';
import { HeadWorkerSampler, type SamplerChannel } from './head-worker-sampler.ts';
import { FROM_SOURCES } from './package-files.ts';
import { rebuiltSampleError, type SampleFailure, type SampleResult, type SamplerCall } from './sampler-host.ts';

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
  /** `picks[b]`: block b's one row is sampled by that call in the worker, and only its token returns. */
  | { readonly id: number; readonly op: 'logits'; readonly hiddens: readonly Activations[]; readonly rows: readonly (readonly number[] | undefined)[]; readonly picks?: readonly (SamplerCall | undefined)[] }
  /** Rows the main thread holds (a speculative step's), sampled by their sequences' samplers here. */
  | { readonly id: number; readonly op: 'sample'; readonly calls: readonly SamplerCall[]; readonly logits: readonly Float32Array[] }
  /** Sequences that ended (no answer). */
  | { readonly op: 'release'; readonly handles: readonly number[] }
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
  /** Every unpicked block's rows, one after another; `counts[b]` values belong to block b (0 for a picked one). */
  readonly logits?: Float32Array;
  readonly counts?: readonly number[];
  /** For a `logits` request with picks: block b's sampled tokens (or failure) where it had a pick. */
  readonly picked?: readonly (readonly VerifiedSample[] | SampleFailure | undefined)[];
  /** A `sample` request's answers, in order. */
  readonly sampled?: readonly SampleResult[];
  readonly error?: Failure;
}

/** The worker-side error as the type the head's callers know. */
function rebuilt(error: Failure): Error {
  if (error.name === 'RangeError') return new RangeError(error.message);
  return new Error(`the head worker failed: ${error.message}`);
}

export class WorkerHeadRunner implements HeadRunner, SamplerChannel {
  private nextHandle = 1;
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

  /** Samplers whose state lives in this worker: a pick by one of them is sampled beside the LM head. */
  readonly samplers: SamplerFactory = (params, vocabSize) => {
    const valid = validateSamplingParams(params); // refused here, at once, as a local Sampler would
    if (!Number.isSafeInteger(vocabSize) || vocabSize < 1) throw new RangeError(`vocabSize must be a positive integer, got ${vocabSize}`);
    return new HeadWorkerSampler(this, this.nextHandle++, valid, vocabSize);
  };

  async logits(hidden: Activations, rows?: readonly number[]): Promise<Float32Array> {
    return (await this.logitsBatch([hidden], [rows]))[0];
  }

  async logitsBatch(hiddens: readonly Activations[], rows: readonly (readonly number[] | undefined)[] = []): Promise<Float32Array[]> {
    return (await this.runBlocks(hiddens.map((hidden, b) => ({ hidden, rows: rows[b] })))) as Float32Array[];
  }

  async runBlocks(blocks: readonly HeadBlock[]): Promise<HeadBlockResult[]> {
    // A pick by one of this worker's samplers is sampled there; any other pick (a sampler made
    // elsewhere) gets its row back and is sampled here, as `sample` would.
    blocks.forEach(checkPickedBlock);
    const picks = blocks.map((b) => (b.pick?.sampler instanceof HeadWorkerSampler && b.pick.sampler.channel === this ? { ...b.pick.sampler.call(b.pick.history, b.pick.mask), drafts: b.pick.drafts } : undefined));
    // The hidden states are copied (structured clone): the caller's buffers stay its own.
    const hiddens = blocks.map(({ hidden: h }) => ({ dtype: h.dtype, data: h.data, tokens: h.tokens, hiddenSize: h.hiddenSize }));
    const reply = await this.call({ id: this.nextId++, op: 'logits', hiddens, rows: blocks.map((b) => b.rows), picks: picks.some(Boolean) ? picks : undefined });
    const out = reply.logits;
    let from = 0;
    return Promise.all(
      blocks.map(async (b, i): Promise<HeadBlockResult> => {
        const picked = reply.picked?.[i];
        if (picked) return 'error' in picked ? rebuiltSampleError(picked.error, 'the head worker') : picked;
        const rows = out!.subarray(from, (from += reply.counts![i]));
        return b.pick ? pickHere(b.pick, rows) : rows;
      }),
    );
  }

  async sample(call: SamplerCall, logits: Float32Array): Promise<VerifiedSample> {
    const reply = await this.call({ id: this.nextId++, op: 'sample', calls: [call], logits: [logits] }, [logits.buffer as ArrayBuffer]);
    const result = reply.sampled![0];
    if ('error' in result) throw rebuiltSampleError(result.error, 'the head worker');
    return result;
  }

  release(handle: number): void {
    if (!this.exited) this.worker.postMessage({ op: 'release', handles: [handle] } satisfies HeadWorkerRequest);
  }

  async dispose(): Promise<void> {
    if (!this.exited) await this.call({ id: this.nextId++, op: 'dispose' }).catch(() => undefined);
    await this.worker.terminate();
  }

  private call(request: Exclude<HeadWorkerRequest, { op: 'release' }>, transfer: ArrayBuffer[] = []): Promise<HeadWorkerReply> {
    if (this.exited) return Promise.reject(this.exited);
    return new Promise((resolve, reject) => {
      this.pending.set(request.id, { resolve, reject });
      this.worker.postMessage(request, transfer);
    });
  }
}
