/**
 * Batching on a chained route (protocol 3.2): a peer's chain frames of different sessions,
 * bound for the same range, run as one batched shard run — the hop-side counterpart of the
 * head's BatchingLink, and the same code (a BatchingLink over an in-process link to the
 * peer's own shard): a decode step that arrives while the range runs another waits and goes
 * with every step that arrived meanwhile, the moment it is free. Under load the sessions of a
 * chain fall into step with each other at the first hop and stay in step along it, since a
 * batch's outputs are forwarded together. Each session's output keeps its own request id,
 * session and start — a lane of one frame per link where the head allowed lanes (protocol 3.4,
 * core/peer/lane-outbox.ts), else its own chain frame — so the head's checks and history, and
 * every failure path, are a lone chained frame's. Prefill frames run alone.
 */
import { errorToControlMessage } from '../../shared/control-errors.ts';
import { FRAME_KIND_CODES, FRAME_OFFSETS, frameRequestId, stampFrameRequestId } from '../../shared/frame-layout.ts';
import { toWireError } from '../peer/wire-errors.ts';
import { InProcessLink } from '../runtime/in-process-link.ts';
import type { FrameReply, ShardService } from '../runtime/shard-service.ts';
import { BatchingLink, type BatchingStats } from './batching-link.ts';

export interface BatchedChainRuns {
  /** Run one chained step (a prefill or decode frame) on the shard; its reply carries the frame's own request id. */
  run(bytes: Uint8Array): Promise<FrameReply>;
  /** The batching link's counts, and the prefill frames that ran alone: every shard run is one of batches, singles or prefills. */
  readonly stats: BatchingStats & { readonly prefills: number };
}

export function batchedChainRuns(shard: ShardService): BatchedChainRuns {
  const link = new BatchingLink(new InProcessLink(shard));
  let prefills = 0;
  return {
    get stats() {
      return { ...link.stats, prefills };
    },
    async run(bytes) {
      if (bytes[FRAME_OFFSETS.kind] === FRAME_KIND_CODES.prefill) prefills++;
      const requestId = frameRequestId(bytes) ?? 0;
      try {
        // The link stamps its own request id on the frame and its result: give the step's back.
        const frame = await link.request(bytes);
        stampFrameRequestId(frame, requestId);
        return { frame };
      } catch (error) {
        return { error: errorToControlMessage(toWireError(error), { requestId }) };
      }
    },
  };
}
