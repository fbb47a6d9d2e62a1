/**
 * Inside the worker: one ShardPeer (HTTP loader, KV store) answering the main thread's
 * frame and control requests. Replies carry the peer's KV entry count.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ShardPeer } from '../../core/peer/shard-peer.ts';
import type { ControlMessage } from '../../shared/control.ts';
import { httpShardLoader, type HttpLoaderOptions } from './http-shard-loader.ts';

export interface ShardWorkerData {
  readonly loader: Omit<HttpLoaderOptions, 'log'>;
  readonly memoryBudgetBytes: number;
}

export type ShardWorkerRequest =
  | { readonly id: number; readonly frame: Uint8Array }
  | { readonly id: number; readonly control: ControlMessage }
  | { readonly id: number; readonly dispose: true };

const data = workerData as ShardWorkerData;
const port = parentPort!;
const shard = new ShardPeer({
  loader: httpShardLoader({ ...data.loader, log: (line) => port.postMessage({ log: line }) }),
  memoryBudgetBytes: data.memoryBudgetBytes,
});

port.on('message', async (request: ShardWorkerRequest) => {
  if ('frame' in request) {
    const reply = await shard.handleFrame(request.frame);
    const transfer = 'frame' in reply ? [reply.frame.buffer as ArrayBuffer] : [];
    port.postMessage({ id: request.id, reply, kvEntries: shard.kvEntries }, transfer);
  } else if ('control' in request) {
    port.postMessage({ id: request.id, answer: await shard.handleControl(request.control), kvEntries: shard.kvEntries });
  } else {
    await shard.dispose();
    port.postMessage({ id: request.id, disposed: true, kvEntries: 0 });
  }
});
