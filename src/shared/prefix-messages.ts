/**
 * Prefix-entry control messages beyond release/fork (which live in control.ts): `forget`
 * (protocol 3.5), the head telling a peer which prefix entries its registry no longer holds.
 * Types and bounds only; control.ts parses them with the rest.
 */
import type { Correlated } from './link-messages.ts';

/** Most prefix ids one `forget` may name (a larger list is refused, `protocol_error`). */
export const MAX_FORGET_IDS = 256;

/**
 * Head → peer (protocol 3.5): the head's prefix registry evicted or forgot these entries, so
 * no `fork` will name them again. The peer drops each one it holds with its descendants (they
 * need its positions; the head forgets an entry's descendants with it, a parent never before
 * its children) and ignores ids it does not hold. Answered by `stats` (the peer's figures
 * after the drop). 1 … MAX_FORGET_IDS canonical UUIDs, no duplicates.
 */
export interface ForgetMessage extends Correlated {
  readonly kind: 'forget';
  readonly prefixIds: readonly string[];
}
