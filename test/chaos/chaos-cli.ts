/**
 * `npm run chaos [-- --minutes M --clients C --seed S]`: the chaos soak of chaos.ts for longer
 * (default 5 minutes, 16 clients, a chaos event every 2–5 s), printing its counts. Exits 1
 * when a completed stream was wrong, a failure was untyped, a peer held a range outside the
 * head's two recent plans (see chaos.ts), or the end was not settled.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { mib } from '../soak/soak.ts';
import { isSettled } from '../soak/soak.ts';
import { runChaos } from './chaos.ts';

const { values } = parseArgs({ options: { minutes: { type: 'string' }, clients: { type: 'string' }, seed: { type: 'string' } } });
const minutes = Number(values.minutes ?? 5);
const clients = Number(values.clients ?? 16);
const home = await mkdtemp(path.join(os.tmpdir(), 'meshnet-chaos-'));
console.log(`chaos: ${minutes} min, ${clients} clients; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
try {
  const r = await runChaos({ durationMs: minutes * 60_000, clients, everyMs: [2000, 5000], home, seed: values.seed ? Number(values.seed) : undefined, log: (line) => console.log(`  ${line}`) });
  const problems = [
    ...(r.wrong.length ? [`${r.wrong.length} completed streams differ from the one-process answer, e.g. ${r.wrong[0]}`] : []),
    ...(r.untyped.length ? [`${r.untyped.length} untyped failures, e.g. ${r.untyped[0]}`] : []),
    ...(r.rangeViolations.length ? [`${r.rangeViolations.length} samples with a range outside the recent plans, e.g. ${r.rangeViolations[0]}`] : []),
    ...(isSettled(r.settled) ? [] : [`not settled: ${JSON.stringify(r.settled.peers)} sessions ${r.settled.trackedSessions}`]),
  ];
  console.log(
    [
      `requests ${r.requests}: ${r.golden} golden, ${r.aborted} aborted by their client, typed errors ${JSON.stringify(r.typed)}, ${r.headDown} cut or refused by the head's restart, ${r.wrong.length} wrong, ${r.untyped.length} untyped`,
      `events ${JSON.stringify(r.events)}; most ranges one peer held ${r.mostRanges}; a leased range off the recent plans held at most ${r.offPlanLongestMs} ms (sampled each second); ${r.rangeViolations.length} range violations`,
      `head after GC: heap ${mib(r.heapAfterChaos)} after the chaos → ${mib(r.heapAtEnd)} settled; rss ${mib(r.rssAfterChaos)} → ${mib(r.rssAtEnd)}`,
      `settled: ${r.settled.trackedSessions} sessions, KV ${r.settled.peers.map((p) => `${p.id} ${p.kvEntries}/${p.kvBytes} B`).join(', ')}; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`,
      problems.length === 0 ? 'chaos passed' : `chaos FAILED:\n  ${problems.join('\n  ')}`,
    ].join('\n'),
  );
  process.exitCode = problems.length === 0 ? 0 : 1;
} finally {
  await rm(home, { recursive: true, force: true });
}
