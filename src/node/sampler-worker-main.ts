/**
 * Inside the sampler worker (sampler-worker.ts): every sequence's Sampler, by handle. A
 * request's calls run in the order they came (a sequence's draws keep their order, so its
 * RNG advances as on one thread) and are answered in one message.
 *
 * Started by the head worker's runner (head-worker.ts) with a port to the head worker, it
 * samples the rows the head worker picked (`PickJobs`, in the order the main thread sent
 * them) and answers the main thread directly (`PickReply`).
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { SamplerHost } from './sampler-host.ts';
import type { PickJobs, PickReply } from './head-worker.ts';
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

const headPort = (workerData as { headPort?: MessagePort } | undefined)?.headPort;
if (headPort) {
  // One job at a time, in order (a chain awaits nothing outside this thread, but is async).
  let chain = Promise.resolve();
  headPort.on('message', (jobs: PickJobs) => {
    chain = chain.then(async () => {
      if ('release' in jobs) return host.dispose(jobs.release);
      if ('sample' in jobs) {
        const { calls, logits } = jobs.sample;
        port.postMessage({ id: jobs.id, sampled: calls.map((call, i) => host.run(call, logits[i])) } satisfies PickReply);
        return;
      }
      const { buffer, jobs: picks } = jobs.picks;
      const picked: NonNullable<PickReply['picked']>[number][] = [];
      for (const job of picks) picked[job.block] = await host.runChain(job.call, new Float32Array(buffer, job.offset * 4, job.length));
      port.postMessage({ id: jobs.id, picked } satisfies PickReply);
    });
  });
}
