/**
 * The chaos soak in CI (chaos.ts; `npm run chaos` runs it for minutes): 18 s of 16 streaming
 * greedy clients with random aborts against a head and 3 peer processes, a chaos event every
 * 2–4 s (a peer SIGKILLed, SIGSTOPped for 1–10 s or restarted) and the head killed and started
 * again once. Every completed stream equals the one-process answer, every failure is a typed
 * error, every second each peer holds only ranges of the head's current and previous plan
 * (or loading, or leased by a session for at most OFF_PLAN_GRACE_MS: it moves to the plan at
 * its next step), and at the end no session is tracked and no peer holds KV. Counts are printed.
 */
import os from 'node:os';
import { afterAll, beforeAll, expect, it, onTestFailed } from 'vitest';
import { tempDir } from '../engine/harness.ts';
import { isSettled, mib } from '../soak/soak.ts';
import { OFF_PLAN_GRACE_MS, runChaos } from './chaos.ts';

let home: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  home = await tempDir('chaos');
});
afterAll(async () => {
  await home?.remove();
});

it('chaos: golden or typed, settled at the end', { timeout: 120_000 }, async () => {
  // The soak's own log (chaos events, quarantines, start figures), printed only when the test fails or times out.
  const started = Date.now();
  const lines: string[] = [];
  onTestFailed(() => console.log(`chaos log (load average ${os.loadavg()[0].toFixed(1)}):\n${lines.join('\n')}`));
  const r = await runChaos({ durationMs: 18_000, clients: 16, everyMs: [2000, 4000], home: home.dir, log: (line) => lines.push(`${((Date.now() - started) / 1000).toFixed(1)} s ${line}`) });
  console.log(
    `chaos (CI): requests ${r.requests}: ${r.golden} golden, ${r.aborted} aborted, typed ${JSON.stringify(r.typed)}, ${r.headDown} cut/refused by the head restart; events ${JSON.stringify(r.events)}; most ranges one peer held ${r.mostRanges}, a leased range off the recent plans at most ${r.offPlanLongestMs} ms; heap ${mib(r.heapAfterChaos)} → ${mib(r.heapAtEnd)}, rss ${mib(r.rssAfterChaos)} → ${mib(r.rssAtEnd)}; load average ${os.loadavg()[0].toFixed(1)}`,
  );
  expect(r.wrong, 'every completed stream is the one-process answer').toEqual([]);
  expect(r.untyped, 'every failure is a typed error').toEqual([]);
  expect(r.rangeViolations, `peers hold only the ranges of the head's current and previous plan (a leased one at most ${OFF_PLAN_GRACE_MS} ms more)`).toEqual([]);
  expect(r.golden).toBeGreaterThan(0);
  expect(r.events['head restarted']).toBe(1);
  expect(Object.values(r.events).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(4);
  expect(isSettled(r.settled), `no session or KV left: ${JSON.stringify(r.settled)}`).toBe(true);
});
