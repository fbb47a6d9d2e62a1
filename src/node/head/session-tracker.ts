/**
 * Accounting of the head's Route Sessions: their telemetry folded into the dashboard state
 * and metrics (started, updated at most every `updateMs` — the last change of a window is
 * sent when it ends —, finished), and the totals. The session table (core's RouteSessions)
 * decides admission and tells this observer.
 */
import type { SessionLimitError } from '../../core/route/route-errors.ts';
import type { SessionObserver } from '../../core/route/route-sessions.ts';
import type { SessionTelemetry } from '../../core/route/route-types.ts';
import type { HeadMetrics } from '../metrics/head-metrics.ts';
import { sessionView, type MeshStateStore } from './state-store.ts';

interface Tracked {
  last: number;
  trailing?: ReturnType<typeof setTimeout>;
}

export class SessionTracker implements SessionObserver {
  private requests = 0;
  private errors = 0;
  private tokensOut = 0;
  private readonly tracked = new Map<string, Tracked>();

  constructor(
    private readonly store: MeshStateStore,
    private readonly metrics: HeadMetrics,
    private readonly model: string,
    private readonly updateMs = 100,
  ) {}

  /** Sessions started and not yet finished. */
  get liveSessions(): number {
    return this.tracked.size;
  }

  started(label: string, telemetry: SessionTelemetry): void {
    this.requests++;
    this.tracked.set(label, { last: 0 });
    this.metrics.setLiveSessions(this.tracked.size);
    this.store.apply({ kind: 'session.started', session: sessionView(label, this.model, telemetry, Date.now()) });
    this.publishTotals(); // the request count moves now, not when the session ends
  }

  updated(label: string, telemetry: SessionTelemetry): void {
    const tracked = this.tracked.get(label);
    if (!tracked || tracked.trailing) return;
    // An update inside the window is not dropped but sent when the window ends (a trailing
    // edge), so a session that pauses — a slow or held hop — still shows where it stands.
    const publish = () => {
      tracked.trailing = undefined;
      tracked.last = Date.now();
      this.store.apply({ kind: 'session.updated', session: sessionView(label, this.model, telemetry, tracked.last) });
    };
    const wait = this.updateMs - (Date.now() - tracked.last);
    if (wait <= 0) return publish();
    tracked.trailing = setTimeout(() => this.tracked.get(label) === tracked && publish(), wait); // `telemetry` is live: it has the latest figures by then
    tracked.trailing.unref?.();
  }

  finished(label: string, telemetry: SessionTelemetry): void {
    const tracked = this.tracked.get(label);
    if (!tracked) return;
    this.tracked.delete(label);
    clearTimeout(tracked.trailing);
    if (telemetry.outcome === 'error') this.errors++;
    this.tokensOut += telemetry.completionTokens;
    this.metrics.setLiveSessions(this.tracked.size);
    this.metrics.sessionObserved(telemetry);
    this.store.apply({ kind: 'session.finished', session: sessionView(label, this.model, telemetry, Date.now()) });
    this.publishTotals();
  }

  /** A request refused before it had a session (counts as an error in the totals). */
  refused(_error?: SessionLimitError): void {
    this.requests++;
    this.errors++;
    this.publishTotals();
  }

  private publishTotals(): void {
    const tokensPerSecond = this.store.state.sessions.reduce((sum, s) => sum + s.tokensPerSecond, 0);
    this.store.apply({ kind: 'totals', totals: { requests: this.requests, errors: this.errors, tokensOut: this.tokensOut, tokensPerSecond } });
  }
}
