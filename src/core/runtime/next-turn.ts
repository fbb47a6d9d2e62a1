/**
 * Run `f` once the current turn is over: after every microtask, including the continuations
 * that the ones already queued chain. Results a batch hands back resolve in one turn; each
 * session's continuation reaches the next hop (or the LM head) within it, so a batch formed
 * on the next turn holds all of them, where one started at once would take the first alone
 * and the rest a full round trip later. Not a timer: nothing waits for work that is not
 * already ready. `setImmediate` where there is one (Node), else a zero-delay timeout.
 */
export function nextTurn(f: () => void): void {
  const immediate = (globalThis as { setImmediate?: (callback: () => void) => unknown }).setImmediate;
  if (typeof immediate === 'function') immediate(f);
  else setTimeout(f, 0);
}
