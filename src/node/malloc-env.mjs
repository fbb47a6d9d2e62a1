// glibc malloc settings a Node peer runs under (issue 24: a peer's memory is what it holds),
// and the re-execution that applies them. Plain JavaScript without dependencies: bin/meshnet.js
// loads it before tsx or the rest of meshnet, so the waiting parent stays small.
//
// Why: onnxruntime frees blocks of its runs (arena regions, a prefill's activations) that glibc
// keeps. A freed mmapped block raises glibc's dynamic mmap threshold to its size, after which
// blocks up to 32 MiB come from the heap and stay resident when freed; and onnxruntime-node's
// runs come from libuv's pool threads, each of which gets a malloc arena of its own.
// MALLOC_MMAP_THRESHOLD_ fixes the threshold (blocks of 64 KiB or more are mapped and unmapped),
// MALLOC_ARENA_MAX=1 keeps one arena. bench/peer-memory.ts (SmolLM2-135M-shaped, 15 q4 layers,
// 512-position prefill, 64 decode steps): resident growth 116 -> 98 MiB, no decode CPU cost
// beyond the noise. glibc reads these only when a process starts, so `meshnet peer` runs itself
// again with them set (the waiting parent: about 7 MiB of its own anonymous memory).

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
 * The variables to start a peer with given an environment, or undefined for none: when
 * MESHNET_MALLOC_ENV=0 turns this off, the C library is not glibc, this is already the
 * re-executed child, or any of them is already set (the user's own setting wins).
 */
export function peerMallocEnv(env = process.env, glibc = isGlibc()) {
  if (env.MESHNET_MALLOC_ENV === '0' || env[CHILD_MARK] !== undefined || !glibc) return undefined;
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
