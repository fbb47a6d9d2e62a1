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
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import type { ActivationDtype } from '../core/model/activations.ts';
import type { WeightSpec } from '../core/model/quant/weight-format.ts';
import { validateSamplingParams, type SamplerFactory, type VerifiedSample } from '../core/sampling/index.ts';
import { checkPickedBlock, pickHere, type HeadBlock, type HeadBlockResult } from '../core/runtime/head-pick.ts';
import type { HeadRunner } from '../core/runtime/ort-head-runner.ts';
import type { Activations } from '../core/runtime/shard-executor.ts';
import { ChannelSampler, type SamplerChannel } from './channel-sampler.ts';
import { FROM_SOURCES } from './package-files.ts';
import { rebuiltSampleError, type SampleFailure, type SampleResult, type SamplerCall } from './sampler-host.ts';
import { hopMark } from '../core/runtime/hop-trace.ts';

const WORKER_ENTRY = new URL(FROM_SOURCES ? './head-worker.mjs' : './head-worker-main.js', import.meta.url);
const SAMPLER_ENTRY = new URL(FROM_SOURCES ? './sampler-worker.mjs' : './sampler-worker-main.js', import.meta.url);

export interface HeadWorkerData {
  readonly modelDir: string;
  readonly device: string;
  readonly dtype: ActivationDtype;
  readonly weights: WeightSpec;
  readonly threads?: number;
  /** The sampler worker's end of a channel (set by `start`): picked rows go there. */
  readonly samplerPort?: MessagePort;
}

/**
 * From the head worker to the sampler worker, in the order main sent them: a `logits`
 * request's picked blocks (views into `buffer`, the LM head's output, transferred), a `sample`
 * request's rows, or sequences that ended. The sampler worker answers the main thread
 * directly with the request's `id` (`PickReply`).
 */
export type PickJobs =
  | { readonly id: number; readonly picks: { readonly buffer: ArrayBuffer; readonly jobs: readonly { readonly block: number; readonly call: SamplerCall; readonly offset: number; readonly length: number }[] } }
  | { readonly id: number; readonly sample: { readonly calls: readonly SamplerCall[]; readonly logits: readonly Float32Array[] } }
  | { readonly release: readonly number[] };

/** The sampler worker's answer to the main thread for a forwarded request. */
export interface PickReply {
  readonly id: number;
  /** By block index; a block without a pick is absent. */
  readonly picked?: readonly (readonly VerifiedSample[] | SampleFailure | undefined)[];
  readonly sampled?: readonly SampleResult[];
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
  /** The picks (or the `sample` request) went on to the sampler worker, which answers them (`PickReply`). */
  readonly forwarded?: boolean;
  readonly error?: Failure;
}

/** The worker-side error as the type the head's callers know. */
function rebuilt(error: Failure): Error {
  if (error.name === 'RangeError') return new RangeError(error.message);
  return new Error(`the head worker failed: ${error.message}`);
}

interface Waiting<T> {
  resolve(reply: T): void;
  reject(error: Error): void;
}

export class WorkerHeadRunner implements HeadRunner, SamplerChannel {
  private nextHandle = 1;
  private readonly pending = new Map<number, Waiting<HeadWorkerReply>>();
  /** Requests whose picks the sampler worker answers (registered before they are sent). */
  private readonly pendingPicks = new Map<number, Waiting<PickReply>>();
  private nextId = 1;
  private exited: Error | undefined;

  private constructor(
    private readonly worker: Worker,
    /** Where picks are sampled, when not in the head worker itself (`start`'s `samplerThread`). */
    private readonly samplerWorker: Worker | undefined,
    readonly device: string,
  ) {
    worker.on('message', (reply: HeadWorkerReply) => {
      hopMark('head.reply');
      const waiting = reply.id === undefined ? undefined : this.pending.get(reply.id);
      if (!waiting) return;
      this.pending.delete(reply.id!);
      // Nothing goes on to the sampler worker when the run failed or had no pick of its samplers.
      if (reply.error || !reply.forwarded) this.pendingPicks.get(reply.id!)?.reject(new Error('no picks were sent'));
      if (reply.error) waiting.reject(rebuilt(reply.error));
      else waiting.resolve(reply);
    });
    samplerWorker?.on('message', (reply: PickReply) => {
      const waiting = this.pendingPicks.get(reply.id);
      this.pendingPicks.delete(reply.id);
      waiting?.resolve(reply);
    });
    const fail = (error: Error) => {
      this.exited ??= error;
      for (const waiting of [...this.pending.values(), ...this.pendingPicks.values()]) waiting.reject(this.exited);
      this.pending.clear();
      this.pendingPicks.clear();
    };
    worker.on('error', (error) => fail(new Error(`the head worker failed: ${error.message}`)));
    worker.on('exit', (code) => fail(new Error(`the head worker exited (code ${code})`)));
    samplerWorker?.on('error', (error) => fail(new Error(`the head's sampler worker failed: ${error.message}`)));
    samplerWorker?.on('exit', (code) => fail(new Error(`the head's sampler worker exited (code ${code})`)));
  }

  /**
   * Starts the worker and waits for its sessions; rejects with the worker's load error. With
   * `samplerThread` (default true) the picks are sampled in a second worker, fed by the head
   * worker directly, so the LM head's next run does not wait for them.
   */
  static start(data: HeadWorkerData, { samplerThread = true }: { samplerThread?: boolean } = {}): Promise<WorkerHeadRunner> {
    const channel = samplerThread ? new MessageChannel() : undefined;
    const sampler = channel && new Worker(SAMPLER_ENTRY, { workerData: { headPort: channel.port2 }, transferList: [channel.port2] });
    sampler?.unref();
    const worker = new Worker(WORKER_ENTRY, { workerData: { ...data, samplerPort: channel?.port1 }, transferList: channel ? [channel.port1] : [] });
    worker.unref(); // a head that is never closed does not keep the process alive
    return new Promise((resolve, reject) => {
      const onExit = (code: number) => reject(new Error(`the head worker exited (code ${code}) before it loaded`));
      worker.once('error', reject);
      worker.once('exit', onExit);
      worker.once('message', (reply: HeadWorkerReply) => {
        worker.off('error', reject);
        worker.off('exit', onExit);
        if (reply.ready) return resolve(new WorkerHeadRunner(worker, sampler, reply.ready.device));
        void worker.terminate();
        void sampler?.terminate();
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
    return new ChannelSampler(this, this.nextHandle++, valid, vocabSize);
  };

  async logits(hidden: Activations, rows?: readonly number[]): Promise<Float32Array> {
    return (await this.logitsBatch([hidden], [rows]))[0];
  }

  async logitsBatch(hiddens: readonly Activations[], rows: readonly (readonly number[] | undefined)[] = []): Promise<Float32Array[]> {
    return (await Promise.all(await this.startBlocks(hiddens.map((hidden, b) => ({ hidden, rows: rows[b] }))))) as Float32Array[];
  }

  async startBlocks(blocks: readonly HeadBlock[]): Promise<Promise<HeadBlockResult>[]> {
    // A pick by one of this worker's samplers is sampled there; any other pick (a sampler made
    // elsewhere) gets its row back and is sampled here, as `sample` would.
    blocks.forEach(checkPickedBlock);
    const picks = blocks.map((b) => (b.pick?.sampler instanceof ChannelSampler && b.pick.sampler.channel === this ? { ...b.pick.sampler.call(b.pick.history, b.pick.mask), drafts: b.pick.drafts } : undefined));
    // The hidden states are copied (structured clone): the caller's buffers stay its own.
    const hiddens = blocks.map(({ hidden: h }) => ({ dtype: h.dtype, data: h.data, tokens: h.tokens, hiddenSize: h.hiddenSize }));
    const id = this.nextId++;
    const anyPick = picks.some(Boolean);
    const elsewhere = anyPick && this.samplerWorker ? this.expectPicks(id) : undefined;
    // Resolves when the LM head ran (the head worker takes the next run); the picks may still be sampling.
    const reply = await this.call({ id, op: 'logits', hiddens, rows: blocks.map((b) => b.rows), picks: anyPick ? picks : undefined });
    const out = reply.logits;
    let from = 0;
    return blocks.map(async (b, i): Promise<HeadBlockResult> => {
      if (picks[i]) {
        const picked = reply.forwarded ? (await elsewhere!).picked?.[i] : reply.picked?.[i];
        if (!picked) throw new Error('the head worker answered no tokens for a pick');
        return 'error' in picked ? rebuiltSampleError(picked.error, 'the head worker') : picked;
      }
      const rows = out!.subarray(from, (from += reply.counts![i]));
      return b.pick ? pickHere(b.pick, rows) : rows;
    });
  }

  async sample(call: SamplerCall, row: Float32Array): Promise<VerifiedSample> {
    const logits = row.slice(); // transferred
    const id = this.nextId++;
    const elsewhere = this.samplerWorker ? this.expectPicks(id) : undefined;
    const reply = await this.call({ id, op: 'sample', calls: [call], logits: [logits] }, [logits.buffer as ArrayBuffer]);
    const result = (reply.forwarded ? (await elsewhere!).sampled : reply.sampled)![0];
    if ('error' in result) throw rebuiltSampleError(result.error, 'the head worker');
    return result;
  }

  release(handle: number): void {
    if (!this.exited) this.worker.postMessage({ op: 'release', handles: [handle] } satisfies HeadWorkerRequest);
  }

  async dispose(): Promise<void> {
    if (!this.exited) await this.call({ id: this.nextId++, op: 'dispose' }).catch(() => undefined);
    await Promise.all([this.worker.terminate(), this.samplerWorker?.terminate()]);
  }

  /** The sampler worker's answer to request `id`, registered before the request is sent. */
  private expectPicks(id: number): Promise<PickReply> {
    const picks = new Promise<PickReply>((resolve, reject) => this.pendingPicks.set(id, { resolve, reject }));
    picks.catch(() => undefined); // awaited only when the head worker says it forwarded them
    return picks;
  }

  private call(request: Exclude<HeadWorkerRequest, { op: 'release' }>, transfer: ArrayBuffer[] = []): Promise<HeadWorkerReply> {
    if (this.exited) return Promise.reject(this.exited);
    return new Promise((resolve, reject) => {
      this.pending.set(request.id, { resolve, reject });
      hopMark('head.post', request.op);
      this.worker.postMessage(request, transfer);
    });
  }
}
