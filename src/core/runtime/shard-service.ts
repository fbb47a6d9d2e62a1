/**
 * The ShardService seam: what a link's far end needs from a peer — answers to frames and
 * control messages, never thrown (failures come back as error replies). ShardPeer is one;
 * a proxy to a ShardPeer in a worker thread is another. InProcessLink and the peer's socket
 * endpoint call it.
 *
 * `handleFrame` takes the frame bytes for the duration of the call (it may read them until
 * it answers, and must not keep them).
 */
import type { ControlMessage, ErrorMessage } from '../../shared/control.ts';

/** The answer to a frame: a result frame, or an error message carrying its request id. */
export type FrameReply = { readonly frame: Uint8Array } | { readonly error: ErrorMessage };

export interface ShardService {
  handleFrame(bytes: Uint8Array): Promise<FrameReply>;
  handleControl(message: ControlMessage): Promise<ControlMessage>;
  /** KV entries held (as last known, for a proxy). */
  readonly kvEntries: number;
  /**
   * Drop every session's KV and prefix entry, keeping the loaded ranges: a peer that joined a
   * head again holds nothing the new connection's head knows of (a restarted head never
   * releases its predecessor's sessions). Its next frames for an old session are cache misses.
   */
  forgetSessions?(): Promise<void>;
  dispose(): Promise<void>;
}
