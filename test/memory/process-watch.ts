// Watching another process from a test: whether it is alive, and waiting for a condition.

/** Wait until `check` holds, polling every 50 ms, at most `ms`. */
export async function until(check: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) if (check()) return true;
  return check();
}

/** Whether process `pid` exists (signal 0 checks without sending anything). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
