/**
 * Inside the sampler worker (sampler-worker.ts): every sequence's Sampler, by handle. A
 * request's calls run in the order they came (a sequence's draws keep their order, so its
 * RNG advances as on one thread) and are answered in one message.
 */
import { parentPort } from 'node:worker_threads';
import { SamplerHost } from './sampler-host.ts';
import type { SamplerWorkerReply, SamplerWorkerRequest } from './sampler-worker.ts';

const port = parentPort!;
const host = new SamplerHost();

port.on('message', (request: SamplerWorkerRequest) => {
  const results = request.jobs.map((job) => host.run(job, job.logits));
  host.dispose(request.dispose);
  if (request.jobs.length === 0) return;
  const buffers = request.jobs.map((job) => job.logits.buffer as ArrayBuffer);
  port.postMessage({ results, buffers } satisfies SamplerWorkerReply, buffers);
});
