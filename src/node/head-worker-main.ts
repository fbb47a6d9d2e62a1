/**
 * Inside the head worker (head-worker.ts): the head's embedding and LM-head sessions
 * (OrtHeadRunner, the same code as on the main thread), loaded from the model folder and the
 * artifact cache. Requests are answered in the order they came; a result's buffer is
 * transferred, not copied.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { asWeightSpec } from '../core/model/quant/weight-format.ts';
import type { OrtHeadRunner } from '../core/runtime/ort-head-runner.ts';
import { loadLocalHeadRunner } from './local-head-runner.ts';
import { openLocalModel } from './local-model.ts';
import { nodeLoaderOptions } from './ort-node-runtime.ts';
import type { HeadWorkerData, HeadWorkerReply, HeadWorkerRequest } from './head-worker.ts';

const port = parentPort!;
const data = workerData as HeadWorkerData;

async function load(): Promise<OrtHeadRunner> {
  const model = await openLocalModel(data.modelDir);
  const weights = asWeightSpec(model.checkpoint.config, data.dtype, data.weights);
  const loader = await nodeLoaderOptions({ device: data.device, dtype: data.dtype, threads: data.threads });
  return loadLocalHeadRunner(model, data.dtype, weights, loader);
}

const failure = (error: unknown) => ({ name: error instanceof Error ? error.name : 'Error', message: error instanceof Error ? error.message : String(error) });

/** One request's answer, and the buffers to transfer with it. */
async function answer(runner: OrtHeadRunner, request: HeadWorkerRequest): Promise<[HeadWorkerReply, ArrayBuffer[]]> {
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
    const { hiddens, rows } = request;
    const blocks = hiddens.length === 1 ? [await runner.logits(hiddens[0], rows[0])] : await runner.logitsBatch(hiddens, rows);
    // logitsBatch's blocks are views of one output; a single block is the whole output.
    const logits = blocks.length === 1 ? blocks[0] : new Float32Array(blocks[0].buffer, blocks[0].byteOffset, blocks.reduce((n, b) => n + b.length, 0));
    return [{ id, logits, counts: blocks.map((b) => b.length) }, [logits.buffer as ArrayBuffer]];
  } catch (error) {
    return [{ id, error: failure(error) }, []];
  }
}

load().then(
  (runner) => {
    // One at a time, in order: onnxruntime runs a session's calls one after another anyway.
    let chain = Promise.resolve();
    port.on('message', (request: HeadWorkerRequest) => {
      chain = chain.then(async () => {
        const [reply, transfer] = await answer(runner, request);
        port.postMessage(reply, transfer);
      });
    });
    port.postMessage({ ready: { device: runner.device } } satisfies HeadWorkerReply);
  },
  (error: unknown) => port.postMessage({ loadError: failure(error) } satisfies HeadWorkerReply),
);
