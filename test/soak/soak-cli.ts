/**
 * `npm run soak [-- --minutes M --concurrency C]`: the soak of soak.ts for longer (default
 * 10 minutes after a 30 s warm-up, 32 clients, a checkpoint a minute), printing each
 * checkpoint and checking the same bounds as the CI soak. Exits 1 when one is not kept.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { HEAP_GROWTH_BYTES, isSettled, mib, RSS_GROWTH_BYTES, runSoak } from './soak.ts';

const { values } = parseArgs({ options: { minutes: { type: 'string' }, concurrency: { type: 'string' } } });
const minutes = Number(values.minutes ?? 10);
const concurrency = Number(values.concurrency ?? 32);
const home = await mkdtemp(path.join(os.tmpdir(), 'meshnet-soak-'));
console.log(`soak: ${minutes} min after a 30 s warm-up, ${concurrency} clients; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
try {
  const report = await runSoak({ warmupMs: 30_000, checkpoints: Math.max(1, Math.round(minutes)), checkpointMs: (minutes * 60_000) / Math.max(1, Math.round(minutes)), concurrency, home, log: (line) => console.log(`  ${line}`) });
  const last = report.points.at(-1)!;
  const problems: string[] = [];
  if (report.failures.length > 0) problems.push(`${report.failures.length} requests failed, e.g. ${report.failures[0]}`);
  if (last.heapUsed - report.warm.heapUsed >= HEAP_GROWTH_BYTES) problems.push(`heap grew ${mib(last.heapUsed - report.warm.heapUsed)} (bound ${mib(HEAP_GROWTH_BYTES)})`);
  const peak = Math.max(...report.points.map((p) => p.rss));
  if (peak - report.warm.rss >= RSS_GROWTH_BYTES) problems.push(`rss grew ${mib(peak - report.warm.rss)} (bound ${mib(RSS_GROWTH_BYTES)})`);
  if (!isSettled(report.settled)) problems.push(`not settled: ${JSON.stringify(report.settled)}`);
  if (report.settled.warnings.length > 0) problems.push(`warnings: ${report.settled.warnings.join('; ')}`);
  console.log(
    [
      `requests ${report.requests} (${report.completed} completed, ${report.disconnected} cut), tokens ${report.tokens}`,
      `heap after GC: ${mib(report.warm.heapUsed)} after warm-up → ${mib(last.heapUsed)} (bound +${mib(HEAP_GROWTH_BYTES)})`,
      `rss: ${mib(report.warm.rss)} after warm-up → peak ${mib(peak)}, last ${mib(last.rss)} (bound +${mib(RSS_GROWTH_BYTES)})`,
      `settled: ${report.settled.trackedSessions} sessions, KV ${report.settled.peers.map((p) => `${p.id} ${p.kvEntries}/${p.kvBytes} B`).join(', ')}`,
      problems.length === 0 ? 'soak passed' : `soak FAILED:\n  ${problems.join('\n  ')}`,
    ].join('\n'),
  );
  process.exitCode = problems.length === 0 ? 0 : 1;
} finally {
  await rm(home, { recursive: true, force: true });
}
