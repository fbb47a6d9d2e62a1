/**
 * Inside the worker: one ShardPeer (its loader, KV store) answering the main thread's
 * frame and control requests. Replies carry the peer's KV entry count. A remote peer loads
 * artifacts from its head over HTTP; the head's own layers load from the local checkpoint.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ShardPeer } from '../../core/peer/shard-peer.ts';
import { type ShardLoader } from '../../core/peer/shard-loader.ts';
import { openLocalModel } from '../local-model.ts';
import { localShardLoader } from '../local-shard-loader.ts';
import type { ControlMessage } from '../../shared/control.ts';
import { httpShardLoader, type HttpLoaderOptions } from './http-shard-loader.ts';

export interface ShardWorkerData {
  readonly loader: ({ readonly kind: 'http' } & Omit<HttpLoaderOptions, 'log'>) | { readonly kind: 'local'; readonly modelDir: string; readonly device: string; readonly threads?: number };
  readonly memoryBudgetBytes: number;
  readonly prefixBudgetBytes?: number;
}

export type ShardWorkerRequest =
  | { readonly id: number; readonly frame: Uint8Array }
  | { readonly id: number; readonly control: ControlMessage }
  | { readonly id: number; readonly forgetSessions: true }
  | { readonly id: number; readonly dispose: true };

const data = workerData as ShardWorkerData;
const port = parentPort!;
const log = (line: string) => port.postMessage({ log: line });
const loader: ShardLoader =
  data.loader.kind === 'http'
    ? httpShardLoader({ ...data.loader, log })
    : localShardLoader(await openLocalModel(data.loader.modelDir), { device: data.loader.device, threads: data.loader.threads });
const shard = new ShardPeer({ loader, memoryBudgetBytes: data.memoryBudgetBytes, prefixBudgetBytes: data.prefixBudgetBytes });

port.on('message', async (request: ShardWorkerRequest) => {
  if ('frame' in request) {
    const reply = await shard.handleFrame(request.frame);
    const transfer = 'frame' in reply ? [reply.frame.buffer as ArrayBuffer] : [];
    port.postMessage({ id: request.id, reply, kvEntries: shard.kvEntries }, transfer);
  } else if ('control' in request) {
    port.postMessage({ id: request.id, answer: await shard.handleControl(request.control), kvEntries: shard.kvEntries });
  } else if ('forgetSessions' in request) {
    await shard.forgetSessions();
    port.postMessage({ id: request.id, forgot: true, kvEntries: shard.kvEntries });
  } else {
    await shard.dispose();
    port.postMessage({ id: request.id, disposed: true, kvEntries: 0 });
  }
});
