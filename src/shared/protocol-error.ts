/**
 * The one error type for anything malformed or refused at the wire: control messages,
 * activation frames, and errors a peer reported (rebuilt from an `error` control message).
 */
import type { ErrorCode } from './protocol.ts';

/** Where a protocol error belongs, when known. */
export interface ProtocolErrorContext {
  readonly sessionId?: string;
  /** The activation frame's request id (u32) the error answers. */
  readonly requestId?: number;
}

/**
 * A typed wire error. `code` is the machine-readable reason (see `ERROR_CODES`); `message`
 * names the offending field or value so it reads well in a log on its own.
 */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
  readonly sessionId?: string;
  readonly requestId?: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    context: ProtocolErrorContext = {},
  ) {
    super(message);
    if (context.sessionId !== undefined) this.sessionId = context.sessionId;
    if (context.requestId !== undefined) this.requestId = context.requestId;
  }
}

export function isProtocolError(error: unknown, code?: ErrorCode): error is ProtocolError {
  return error instanceof ProtocolError && (code === undefined || error.code === code);
}
