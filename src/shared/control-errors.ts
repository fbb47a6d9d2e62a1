/**
 * Errors as data: turn a thrown error into the `error` control message to send, and an
 * arriving `error` message back into a typed `ProtocolError`.
 */
import type { ErrorMessage } from './control.ts';
import { ProtocolError } from './protocol-error.ts';

/** Longest error text sent; longer messages are cut (the parser refuses more). */
const MAX_ERROR_MESSAGE_CHARS = 4096;

/**
 * The `error` message to send for `error`: a `ProtocolError` keeps its code and context;
 * anything else becomes 'internal' with its message. `context` fills what the error lacks.
 */
export function errorToControlMessage(
  error: unknown,
  context: { id?: string; sessionId?: string; requestId?: number } = {},
): ErrorMessage {
  const typed = error instanceof ProtocolError ? error : undefined;
  const message = error instanceof Error ? error.message : String(error);
  const sessionId = typed?.sessionId ?? context.sessionId;
  const requestId = typed?.requestId ?? context.requestId;
  return {
    kind: 'error',
    ...(context.id !== undefined && { id: context.id }),
    code: typed?.code ?? 'internal',
    message: message.slice(0, MAX_ERROR_MESSAGE_CHARS),
    ...(sessionId !== undefined && { sessionId }),
    ...(requestId !== undefined && { requestId }),
  };
}

/** Rebuild the typed error a peer reported. */
export function errorFromControlMessage(message: ErrorMessage): ProtocolError {
  const context = { sessionId: message.sessionId, requestId: message.requestId };
  return new ProtocolError(message.code, message.message, context);
}
