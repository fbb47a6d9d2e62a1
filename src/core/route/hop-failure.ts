/**
 * What a failed hop call means for the session: the one place that decides whether a hop is
 * rebuilt, replaced, its peer quarantined, or the session ended. Pure.
 */
import { isProtocolError } from '../../shared/protocol-error.ts';
import { LinkAnswerError, LinkClosedError, LinkTimeoutError } from '../runtime/peer-link.ts';
import { HopDeadlineError, HopFailedError, HopMismatchError } from './route-errors.ts';

/**
 * - `cache_miss`: the peer lost this session's KV (evicted, restarted): replay the hop's
 *   history to the same peer.
 * - `lost`: the peer is gone (its link closed) or cancelled the request: replace it. Not its
 *   fault; no quarantine.
 * - `hung`: no answer within the hop's deadline: replace it and quarantine the peer.
 * - `faulty`: an answer the session cannot use (another request's frame, the wrong shape,
 *   NaN/Inf, garbage bytes), the peer's own failure (`internal`, e.g. GPU out of memory), or
 *   a refusal an honest peer never gives a leased hop: `not_ready` for a range it answered
 *   `ready` for (the head unloads only ranges nobody leases), `unknown_session` for a session
 *   the head has not released, `cache_miss` for a prefill (which builds the state; the
 *   session decides that one, as only it knows the frame's position): replace it and
 *   quarantine the peer.
 * - `mismatch`: a well-formed answer that disagreed with a replay of the same steps on
 *   another holder of the range (`--verify`, verify-hop.ts): replace it and quarantine the peer.
 * - `fatal`: not the peer's doing (a bug in the head, bad input): the session ends.
 */
export type HopFailureKind = 'cache_miss' | 'lost' | 'hung' | 'faulty' | 'mismatch' | 'fatal';

export interface HopFailure {
  readonly kind: HopFailureKind;
  readonly reason: string;
}

/** Codes a peer reports that mean "not here (any more)" rather than "broken". */
const LOST_CODES = new Set(['cancelled']);

/**
 * Classify what a hop call threw. Errors the session raised about an answer (HopFailedError),
 * a link's verdict on an answer (LinkAnswerError) and a peer's refusal (ProtocolError) are
 * the peer's; a missed deadline or link timeout is a hung peer; a closed link is a lost one.
 * Anything else (a TypeError in the head, an encode failure) is fatal.
 */
export function classifyHopFailure(error: unknown): HopFailure {
  const reason = error instanceof Error ? error.message : String(error);
  if (error instanceof HopDeadlineError || error instanceof LinkTimeoutError) return { kind: 'hung', reason };
  if (error instanceof HopMismatchError) return { kind: 'mismatch', reason };
  if (error instanceof LinkClosedError) return { kind: 'lost', reason };
  if (error instanceof HopFailedError || error instanceof LinkAnswerError) return { kind: 'faulty', reason };
  if (isProtocolError(error)) {
    if (error.code === 'cache_miss') return { kind: 'cache_miss', reason };
    if (LOST_CODES.has(error.code)) return { kind: 'lost', reason };
    // internal, nan_activations, bad_frame, wrong_payload_size, …: every frame the head sends
    // is encoded by its own codec from finite activations, so a refusal of it is the peer's.
    return { kind: 'faulty', reason: `the peer answered ${error.code}: ${reason}` };
  }
  return { kind: 'fatal', reason };
}

/** Whether the peer should be quarantined (not trusted by other sessions for a while). */
export function quarantines(failure: HopFailure): boolean {
  return failure.kind === 'hung' || failure.kind === 'faulty' || failure.kind === 'mismatch';
}
