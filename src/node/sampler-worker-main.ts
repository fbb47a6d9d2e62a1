/**
 * Inside the sampler worker (sampler-worker.ts): every sequence's Sampler, by handle. A
 * request's calls run in the order they came (a sequence's draws keep their order, so its
 * RNG advances as on one thread) and are answered in one message.
 */
import { parentPort } from 'node:worker_threads';
import { Sampler } from '../core/sampling/sampler.ts';
import type { SampleResult, SamplerWorkerReply, SamplerWorkerRequest } from './sampler-worker.ts';

const port = parentPort!;
const samplers = new Map<number, Sampler>();

port.on('message', (request: SamplerWorkerRequest) => {
  const results: SampleResult[] = request.jobs.map((job) => {
    try {
      let sampler = samplers.get(job.handle);
      if (!sampler && job.open) samplers.set(job.handle, (sampler = new Sampler(job.open.params, job.open.vocabSize)));
      if (!sampler) throw new Error(`no sampler ${job.handle} (disposed)`);
      const history = job.history ?? { prompt: [], generated: [] };
      return job.draft ? sampler.verify(job.logits, history, job.draft, job.mask) : { ...sampler.sample(job.logits, history, job.mask), accepted: false };
    } catch (error) {
      return { error: { name: error instanceof Error ? error.name : 'Error', message: error instanceof Error ? error.message : String(error) } };
    }
  });
  for (const handle of request.dispose) samplers.delete(handle);
  if (request.jobs.length === 0) return;
  const buffers = request.jobs.map((job) => job.logits.buffer as ArrayBuffer);
  port.postMessage({ results, buffers } satisfies SamplerWorkerReply, buffers);
});
