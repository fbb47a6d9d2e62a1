/**
 * SessionTracker's updates: at most one per window, the window's last change sent when it
 * ends (so a paused session shows where it stands), nothing after the finish.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { SessionTelemetry } from '../../src/core/route/route-types.ts';
import { SessionTracker } from '../../src/node/head/session-tracker.ts';
import { MeshStateStore } from '../../src/node/head/state-store.ts';
import { HeadMetrics } from '../../src/node/metrics/head-metrics.ts';
import type { MeshEvent } from '../../src/shared/dashboard-state.ts';

const telemetry = (): SessionTelemetry => ({
  sessionId: '1b4e28ba-2fa1-41d2-883f-0016d3cca427',
  startedAt: Date.now(),
  promptTokens: 4,
  completionTokens: 0,
  outcome: 'running',
  hops: [{ peerId: 'a', range: { start: 0, end: 5 }, frames: 0, tokens: 0, totalMs: 0, lastMs: 0, kvPositions: 0 }],
  repairs: [],
  releases: [],
});

beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
afterEach(() => vi.useRealTimers());

describe('SessionTracker updates', () => {
  it('sends the last change of a window when the window ends, and nothing after the finish', () => {
    const store = new MeshStateStore();
    const events: MeshEvent[] = [];
    store.subscribe((event) => events.push(event));
    const tracker = new SessionTracker(store, new HeadMetrics(), 'demo', 100);
    const t = telemetry();
    tracker.started('chatcmpl-1', t);
    const tracked = { onUpdate: (x: SessionTelemetry) => tracker.updated('chatcmpl-1', x), finish: (x: SessionTelemetry) => tracker.finished('chatcmpl-1', x) };
    const frames = () => events.filter((e) => e.kind === 'session.updated').map((e) => (e.kind === 'session.updated' ? e.session.hops[0]!.frames : -1));

    t.hops[0]!.frames = 1;
    tracked.onUpdate(t); // the first window is open: sent now
    expect(frames()).toEqual([1]);
    for (const n of [2, 3, 4]) {
      vi.advanceTimersByTime(10);
      t.hops[0]!.frames = n;
      tracked.onUpdate(t);
    }
    expect(frames()).toEqual([1]); // held until the window ends…
    vi.advanceTimersByTime(70);
    expect(frames()).toEqual([1, 4]); // …then sent with the latest figures, though nothing more came
    t.hops[0]!.frames = 5;
    tracked.onUpdate(t); // within the next window: scheduled
    t.outcome = 'cancelled';
    tracked.finish(t);
    vi.advanceTimersByTime(500);
    expect(frames()).toEqual([1, 4]);
    expect(events.at(-2)).toMatchObject({ kind: 'session.finished', session: { state: 'cancelled', hops: [{ frames: 5 }] } });
  });
});
