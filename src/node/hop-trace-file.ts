/**
 * The Node sink for hop-trace.ts marks: with MESHNET_HOP_TRACE=<dir>, each thread that calls
 * `installHopTraceFromEnv` appends `<µs> <stage>` lines to <dir>/<pid>-<thread>.log, the
 * time on the monotonic clock every process on the machine shares (process.hrtime), so the
 * marks of the head, its workers and the peers line up. Written in batches (every 250 ms and
 * at exit), never per mark. Without the variable nothing is installed.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import { setHopTraceSink } from '../core/runtime/hop-trace.ts';

let installed = false;

export function installHopTraceFromEnv(env: NodeJS.ProcessEnv = process.env): void {
  const dir = env.MESHNET_HOP_TRACE;
  if (!dir || installed) return;
  installed = true;
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${process.pid}-${threadId}.log`);
  let lines: string[] = [];
  const flush = () => {
    if (lines.length === 0) return;
    const text = lines.join('');
    lines = [];
    appendFileSync(file, text);
  };
  setHopTraceSink((stage) => {
    lines.push(`${Number(process.hrtime.bigint() / 100n) / 10} ${stage}\n`);
  });
  setInterval(flush, 250).unref();
  process.on('exit', flush);
}
