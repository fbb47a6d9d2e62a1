/**
 * A ShardService whose ShardPeer runs in a worker thread (docs/platform.md: onnxruntime-node's
 * `session.run()` blocks the event loop). Frames are copied once into a fresh buffer and
 * transferred, not cloned; answers come back the same way.
 */
import { Worker } from 'node:worker_threads';
import type { FrameReply, ShardService } from '../../core/runtime/shard-service.ts';
import type { ControlMessage } from '../../shared/control.ts';
import { FROM_SOURCES } from '../package-files.ts';
import type { ShardWorkerData } from './shard-worker-main.ts';

// The built package starts the worker's JavaScript itself; from the TypeScript sources a small
// .mjs registers tsx in the worker first (a worker does not inherit the main thread's loader).
const WORKER_ENTRY = new URL(FROM_SOURCES ? './shard-worker.mjs' : './shard-worker-main.js', import.meta.url);

interface WorkerReply {
  readonly id?: number;
  readonly reply?: FrameReply;
  readonly answer?: ControlMessage;
  readonly kvEntries?: number;
  readonly log?: string;
}

export class WorkerShardService implements ShardService {
  private readonly worker: Worker;
  private readonly pending = new Map<number, (reply: WorkerReply) => void>();
  private nextId = 1;
  private entries = 0;
  private exited: Error | undefined;

  constructor(data: ShardWorkerData, log: (line: string) => void = () => {}) {
    this.worker = new Worker(WORKER_ENTRY, { workerData: data });
    this.worker.on('message', (message: WorkerReply) => {
      if (message.log !== undefined) return log(message.log);
      if (message.kvEntries !== undefined) this.entries = message.kvEntries;
      const resolve = message.id === undefined ? undefined : this.pending.get(message.id);
      if (resolve) {
        this.pending.delete(message.id!);
        resolve(message);
      }
    });
    this.worker.on('error', (error) => log(`shard worker failed: ${error.message}`));
    this.worker.on('exit', (code) => {
      this.exited = new Error(`the shard worker exited (code ${code})`);
      for (const resolve of this.pending.values()) resolve({});
      this.pending.clear();
    });
  }

  get kvEntries(): number {
    return this.entries;
  }

  async handleFrame(bytes: Uint8Array): Promise<FrameReply> {
    const copy = new Uint8Array(bytes); // a fresh buffer we can transfer (socket buffers are pooled)
    const reply = await this.send({ frame: copy }, [copy.buffer]);
    return reply.reply ?? { error: { kind: 'error', code: 'internal', message: this.exited?.message ?? 'no answer from the shard worker' } };
  }

  async handleControl(message: ControlMessage): Promise<ControlMessage> {
    const reply = await this.send({ control: message });
    return reply.answer ?? { kind: 'error', id: message.id, code: 'internal', message: this.exited?.message ?? 'no answer from the shard worker' };
  }

  async forgetSessions(): Promise<void> {
    await this.send({ forgetSessions: true });
  }

  async dispose(): Promise<void> {
    if (!this.exited) await this.send({ dispose: true });
    await this.worker.terminate();
  }

  private send(body: object, transfer: ArrayBuffer[] = []): Promise<WorkerReply> {
    if (this.exited) return Promise.resolve({});
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.worker.postMessage({ id, ...body }, transfer);
    });
  }
}
