/**
 * Comparing secrets (join tokens, API keys) without an early exit, so timing does not reveal
 * how much of a token matched. A leaf: the head, its peers and their direct-link handshake
 * all use it.
 */
export function sameToken(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) diff |= (a.charCodeAt(i) | 0) ^ (b.charCodeAt(i) | 0);
  return diff === 0;
}
