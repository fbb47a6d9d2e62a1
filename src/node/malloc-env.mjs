// glibc malloc settings a Node peer can run under (issue 24: a peer's memory is what it holds),
// and the re-execution that applies them. Plain JavaScript without dependencies: bin/meshnet.js
// loads it before tsx or the rest of meshnet, so the waiting parent stays small.
//
// Why: onnxruntime frees blocks of its runs (arena regions, a prefill's activations) that glibc
// keeps. A freed mmapped block raises glibc's dynamic mmap threshold to its size, after which
// blocks up to 32 MiB come from the heap and stay resident when freed; and onnxruntime-node's
// runs come from libuv's pool threads, each of which gets a malloc arena of its own.
// MALLOC_MMAP_THRESHOLD_ fixes the threshold (blocks of 64 KiB or more are mapped and unmapped),
// MALLOC_ARENA_MAX=1 keeps one arena. glibc reads these only when a process starts, so
// `meshnet peer` runs itself again with them set (the waiting parent: about 7 MiB of its own
// anonymous memory).
//
// Opt-in (MESHNET_MALLOC_ENV=1), because the memory is paid for in speed. bench/peer-memory.ts
// (SmolLM2-135M-shaped, 15 q4 layers, 512-position prefill, 64 decode steps): resident growth
// 116 -> 98 MiB on an Intel Xeon with no decode cost resolvable; on an AMD EPYC (Zen 5) 115.5 ->
// 95.8 MiB, but decode CPU 5.53 -> 6.59 ms a step (5.32 -> 6.61 in another run) and faults 25 -> 70 a step (every block of
// 64 KiB or more mapped, faulted in and unmapped again each run), the prefill 564 -> 718 ms; and
// 2 relay peers kept 52-76% of one process in q8/q4 with it against 73-98% without (4 runs). Thresholds
// that keep the speed (1 MiB, or 1 MiB with an 8 MiB trim threshold) keep the memory too
// (111-113 MiB): the saving is exactly the blocks that cost the faults.

/** The variables (glibc ignores them elsewhere; musl and other systems never see them). */
export const PEER_MALLOC_ENV = Object.freeze({ MALLOC_ARENA_MAX: '1', MALLOC_MMAP_THRESHOLD_: '65536' });

/** Set in the re-executed child, so it knows to watch its parent (and never runs itself again). */
const CHILD_MARK = 'MESHNET_MALLOC_CHILD';

let glibcSeen;

/**
 * Whether this process's C library is glibc (Linux only: process.report's glibcVersionRuntime).
 * Read once; the report leaves out its network part (a reverse lookup per open socket).
 */
export function isGlibc() {
  if (glibcSeen !== undefined) return glibcSeen;
  if (process.platform !== 'linux' || process.report === undefined) return (glibcSeen = false);
  const exclude = process.report.excludeNetwork;
  process.report.excludeNetwork = true;
  try {
    glibcSeen = Boolean(process.report.getReport().header.glibcVersionRuntime);
  } finally {
    process.report.excludeNetwork = exclude;
  }
  return glibcSeen;
}

/**
 * The variables to start a peer with given an environment, or undefined for none: unless
 * MESHNET_MALLOC_ENV=1 asks for them, the C library is glibc, this is not already the
 * re-executed child, and none of them is set already (the user's own setting wins).
 */
export function peerMallocEnv(env = process.env, glibc = isGlibc()) {
  if (env.MESHNET_MALLOC_ENV !== '1' || env[CHILD_MARK] !== undefined || !glibc) return undefined;
  if (Object.keys(PEER_MALLOC_ENV).some((key) => env[key] !== undefined)) return undefined;
  return { ...PEER_MALLOC_ENV };
}

/**
 * Run `script` with `args` again under `add` (node's own options kept), its stdio this
 * process's, and resolve with the code to exit with. SIGINT, SIGTERM and SIGHUP sent to this
 * process are passed on (the peer closes on a second signal as on the first); a child killed by
 * a signal is reported as 128 + its number. The child watches the parent through an IPC
 * channel (see watchParent) so it does not outlive a parent killed with SIGKILL.
 */
export function reexec(script, args, add) {
  // Never from the re-executed child, nor with node's -e/-p code in execArgv: either would run again, and again.
  if (process.env[CHILD_MARK] !== undefined) return Promise.reject(new Error('reexec: this process is already the re-executed child'));
  if (process.execArgv.some((a) => /^(-e|-p|--eval|--print)(=|$)/.test(a))) return Promise.reject(new Error('reexec: node runs -e/-p code, not a script'));
  return Promise.all([import('node:child_process'), import('node:os')]).then(
    ([{ spawn }, { constants }]) =>
      new Promise((resolve) => {
        const child = spawn(process.execPath, [...process.execArgv, script, ...args], {
          stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
          env: { ...process.env, ...add, [CHILD_MARK]: String(process.pid) },
        });
        const forward = (signal) => child.kill(signal);
        const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
        for (const signal of signals) process.on(signal, forward);
        child.once('error', (error) => {
          process.stderr.write(`meshnet: could not start the peer again with glibc's malloc settings: ${error.message}\n`);
          resolve(1);
        });
        child.once('exit', (code, signal) => {
          for (const s of signals) process.off(s, forward);
          resolve(code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0));
        });
      }),
  );
}

/**
 * In the re-executed child: end with SIGTERM (the peer's own clean close) when the parent's IPC
 * channel closes, i.e. when the parent is gone; the channel does not keep the process alive.
 * A parent already gone before this runs (killed while the child was loading: the channel
 * closed, or this process was handed to another parent) ends it too. The mark leaves this
 * process's environment, so processes it starts are not taken for re-executed children.
 * A no-op in any other process. Returns whether this process is the re-executed child.
 */
export function watchParent() {
  const mark = process.env[CHILD_MARK];
  if (mark === undefined) return false;
  delete process.env[CHILD_MARK];
  if (process.channel) {
    process.channel.unref();
    process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  }
  // Gone already: handed to another parent, or the channel closed (and left: process.channel is then undefined).
  if (String(process.ppid) !== mark || !process.connected) process.kill(process.pid, 'SIGTERM');
  return true;
}
