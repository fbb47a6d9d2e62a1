/** How a peer's failures travel: as the typed error the wire carries, with the request id when a frame names one. */
import { ProtocolError } from '../../shared/protocol-error.ts';
import { CacheMissError } from '../runtime/shard-executor.ts';

/** An executor's CacheMissError or RangeError as the ProtocolError the head is sent (anything else as it is: `internal`). */
export function toWireError(error: unknown): unknown {
  if (error instanceof CacheMissError) return new ProtocolError('cache_miss', error.message, { sessionId: error.sessionId });
  if (error instanceof RangeError) return new ProtocolError('wrong_payload_size', error.message);
  return error;
}

/** The request id of a frame too malformed to decode, if its header gets that far. */
export function peekRequestId(bytes: Uint8Array): number | undefined {
  if (bytes.byteLength < 12) return undefined;
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(8, true);
}
