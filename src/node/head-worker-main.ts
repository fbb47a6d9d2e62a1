/**
 * Inside the head worker (head-worker.ts): the head's embedding and LM-head sessions
 * (OrtHeadRunner, the same code as on the main thread), loaded from the model folder and the
 * artifact cache, and the sequences' samplers that pick a decode step's row beside the LM head
 * (sampler-host.ts). Requests are answered in the order they came; a result's buffer is
 * transferred, not copied.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { asWeightSpec } from '../core/model/quant/weight-format.ts';
import type { OrtHeadRunner } from '../core/runtime/ort-head-runner.ts';
import { loadLocalHeadRunner } from './local-head-runner.ts';
import { openLocalModel } from './local-model.ts';
import type { VerifiedSample } from '../core/sampling/index.ts';
import { SamplerHost, type SampleFailure } from './sampler-host.ts';
import { nodeLoaderOptions } from './ort-node-runtime.ts';
import type { HeadWorkerData, HeadWorkerReply, HeadWorkerRequest, PickJobs } from './head-worker.ts';
import { installHopTraceFromEnv } from './hop-trace-file.ts';
import { hopMark } from '../core/runtime/hop-trace.ts';

installHopTraceFromEnv();

const port = parentPort!;
/** The sequences' samplers that pick rows beside the LM head (channel-sampler.ts). */
const samplers = new SamplerHost();

const data = workerData as HeadWorkerData;
/** The sampler worker's port, when the head has one: picks are sampled there instead of here. */
const toSampler = data.samplerPort;

async function load(): Promise<OrtHeadRunner> {
  const model = await openLocalModel(data.modelDir);
  const weights = asWeightSpec(model.checkpoint.config, data.dtype, data.weights);
  const loader = await nodeLoaderOptions({ device: data.device, dtype: data.dtype, threads: data.threads });
  return loadLocalHeadRunner(model, data.dtype, weights, loader);
}

const failure = (error: unknown) => ({ name: error instanceof Error ? error.name : 'Error', message: error instanceof Error ? error.message : String(error) });

/** One request's answer, and the buffers to transfer with it. */
async function answer(runner: OrtHeadRunner, request: Exclude<HeadWorkerRequest, { op: 'release' }>): Promise<[HeadWorkerReply, ArrayBuffer[]]> {
  const { id } = request;
  try {
    if (request.op === 'embed') {
      const out = await runner.embed(request.ids);
      return [{ id, embedded: out }, [out.data.buffer as ArrayBuffer]];
    }
    if (request.op === 'dispose') {
      await runner.dispose();
      return [{ id }, []];
    }
    if (request.op === 'sample') {
      if (toSampler) {
        toSampler.postMessage({ id, sample: { calls: request.calls, logits: request.logits } } satisfies PickJobs, request.logits.map((l) => l.buffer as ArrayBuffer));
        return [{ id, forwarded: true }, []];
      }
      const sampled = request.calls.map((call, i) => samplers.run(call, request.logits[i]));
      return [{ id, sampled }, []];
    }
    const { hiddens, rows, picks } = request;
    const blocks = hiddens.length === 1 ? [await runner.logits(hiddens[0], rows[0])] : await runner.logitsBatch(hiddens, rows);
    if (!picks) {
      // logitsBatch's blocks are views of one output; a single block is the whole output.
      const logits = blocks.length === 1 ? blocks[0] : new Float32Array(blocks[0].buffer, blocks[0].byteOffset, blocks.reduce((n, b) => n + b.length, 0));
      return [{ id, logits, counts: blocks.map((b) => b.length) }, [logits.buffer as ArrayBuffer]];
    }
    // Picked rows are sampled in the sampler worker (the LM head's next run need not wait for
    // them; the output buffer is transferred there whole) or, without one, here; only their
    // tokens go back. The other blocks' rows go back in one new buffer (a constrained
    // speculative step's, beside decode steps).
    const counts = blocks.map((block, b) => (picks[b] ? 0 : block.length));
    const total = counts.reduce((n, c) => n + c, 0);
    const logits = total === 0 ? undefined : new Float32Array(total);
    let at = 0;
    blocks.forEach((block, b) => {
      if (!picks[b]) logits!.set(block, (at += block.length) - block.length);
    });
    const transfer = logits ? [logits.buffer as ArrayBuffer] : [];
    if (toSampler) {
      const jobs = blocks.flatMap((block, b) => (picks[b] ? [{ block: b, call: picks[b]!, offset: block.byteOffset / 4, length: block.length }] : []));
      toSampler.postMessage({ id, picks: { buffer: blocks[0].buffer as ArrayBuffer, jobs } } satisfies PickJobs, [blocks[0].buffer as ArrayBuffer]);
      return [{ id, logits, counts, forwarded: true }, transfer];
    }
    const picked: (VerifiedSample[] | SampleFailure | undefined)[] = [];
    for (let b = 0; b < blocks.length; b++) picked.push(picks[b] ? await samplers.runChain(picks[b]!, blocks[b]) : undefined);
    return [{ id, logits, counts, picked }, transfer];
  } catch (error) {
    return [{ id, error: failure(error) }, []];
  }
}

load().then(
  (runner) => {
    // One at a time, in order: onnxruntime runs a session's calls one after another anyway.
    let chain = Promise.resolve();
    port.on('message', (request: HeadWorkerRequest) => {
      if (request.op === 'release') {
        // After the calls already queued (the chain runs in order), and passed on in that order.
        chain = chain.then(() => (toSampler ? toSampler.postMessage({ release: request.handles } satisfies PickJobs) : samplers.dispose(request.handles)));
        return;
      }
      hopMark('headw.recv', request.op);
      chain = chain.then(async () => {
        const [reply, transfer] = await answer(runner, request);
        hopMark('headw.post');
        port.postMessage(reply, transfer);
      });
    });
    port.postMessage({ ready: { device: runner.device } } satisfies HeadWorkerReply);
  },
  (error: unknown) => port.postMessage({ loadError: failure(error) } satisfies HeadWorkerReply),
);
