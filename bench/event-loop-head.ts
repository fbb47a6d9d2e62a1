/**
 * The head process of `npm run bench:event-loop` (bench/event-loop.ts): `serveHead` over the
 * model in DIR with 2 local peer processes, the CLI's defaults otherwise, and the head's own
 * event loop observed from inside. Over IPC the parent opens and closes measurement windows;
 * for each window this process answers with `monitorEventLoopDelay` (resolution 1 ms)
 * p50 / p99 / max, the main thread's busy time (`performance.eventLoopUtilization`: every
 * synchronous stretch, onnxruntime's `run` included), the process's CPU time (all threads:
 * onnxruntime's pool, the grammar worker, GC) and the window's bounds on the monotonic clock
 * the `--cpu-prof` profile uses, and the main thread's own CPU time (/proc; unlike the busy
 * time, not inflated when a loaded machine deschedules the thread), so the parent can cut the profile to the window.
 *
 *   node [--cpu-prof --cpu-prof-dir D] --import tsx bench/event-loop-head.ts DIR [HEAD_LAYERS] [worker|sampler|main]
 */
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay, performance, type EventLoopUtilization } from 'node:perf_hooks';
import { serveHead } from '../src/node/serve/serve-head.ts';

const [dir, headLayers = 'auto', variant = 'worker'] = process.argv.slice(2);
if (!dir || !process.send || (variant !== 'worker' && variant !== 'sampler' && variant !== 'main')) {
  console.error('usage (forked with IPC): event-loop-head.ts DIR [HEAD_LAYERS] [worker|sampler|main]');
  process.exit(2);
}
const send = (message: unknown) => process.send!(message);

const serving = await serveHead({
  model: dir,
  port: 0,
  host: '127.0.0.1',
  localPeers: 2,
  link: 'relay',
  headLayers,
  maxSessions: 32,
  prefixCacheMb: 256,
  device: 'cpu',
  dtype: 'fp32',
  threads: 1,
  // worker: LM head and sampling off the loop; sampler: only sampling; main: neither.
  samplingThread: variant === 'main' ? 'main' : 'worker',
  headThread: variant === 'worker' ? 'worker' : 'main',
  log: (line) => console.error(`[head] ${line}`),
});
await serving.head.waitForPeers(2, 120_000);

interface Window {
  readonly delay: ReturnType<typeof monitorEventLoopDelay>;
  readonly elu: EventLoopUtilization;
  readonly cpu: NodeJS.CpuUsage;
  readonly startUs: number;
  readonly mainCpuMs: number;
}
const windows = new Map<string, Window>();
const nowUs = () => Number(process.hrtime.bigint() / 1000n);
/** The main thread's own CPU time, ms (/proc: utime + stime of the thread whose id is the pid; 10 ms ticks). */
const mainCpuMs = () => {
  const fields = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
};

process.on('message', (message: { cmd: string; name?: string }) => {
  if (message.cmd === 'start' && message.name) {
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    windows.set(message.name, { delay, elu: performance.eventLoopUtilization(), cpu: process.cpuUsage(), startUs: nowUs(), mainCpuMs: mainCpuMs() });
    send({ cmd: 'started', name: message.name });
  } else if (message.cmd === 'stop' && message.name) {
    const w = windows.get(message.name);
    if (!w) return;
    w.delay.disable();
    const elu = performance.eventLoopUtilization(w.elu);
    const cpu = process.cpuUsage(w.cpu);
    const ms = (ns: number) => ns / 1e6;
    send({
      cmd: 'stopped',
      name: message.name,
      startUs: w.startUs,
      endUs: nowUs(),
      delay: { p50: ms(w.delay.percentile(50)), p99: ms(w.delay.percentile(99)), max: ms(w.delay.max), count: w.delay.count },
      mainActiveMs: elu.active,
      mainUtilization: elu.utilization,
      cpuMs: (cpu.user + cpu.system) / 1000,
      mainCpuMs: mainCpuMs() - w.mainCpuMs,
    });
  } else if (message.cmd === 'exit') {
    void serving.close().finally(() => process.exit(0)); // exit (not a signal) writes the --cpu-prof profile
  }
});
send({ cmd: 'ready', url: serving.head.url, modelId: serving.modelId });
