/**
 * Live Route Sessions on the head: the `--max-sessions` slots, and their telemetry folded
 * into the dashboard state and metrics (started, updated at most every `updateMs` — the
 * last change of a window is sent when it ends —, finished).
 */
import type { SessionTelemetry } from '../../core/route/route-types.ts';
import type { HeadMetrics } from '../metrics/head-metrics.ts';
import { sessionView, type MeshStateStore } from './state-store.ts';

export interface TrackedSession {
  /** Pass as the Route Session's `onUpdate`. */
  readonly onUpdate: (telemetry: SessionTelemetry) => void;
  /** Call once when the response is done (any outcome). */
  finish(telemetry: SessionTelemetry): void;
}

export class SessionTracker {
  private live = 0;
  private requests = 0;
  private errors = 0;
  private tokensOut = 0;

  constructor(
    private readonly store: MeshStateStore,
    private readonly metrics: HeadMetrics,
    private readonly model: string,
    private readonly maxSessions: number,
    private readonly updateMs = 100,
  ) {}

  get liveSessions(): number {
    return this.live;
  }

  /** A slot for a new session, or undefined when `maxSessions` are live. */
  begin(apiId: string, telemetry: SessionTelemetry): TrackedSession | undefined {
    if (this.live >= this.maxSessions) return undefined;
    this.live++;
    this.requests++;
    this.metrics.setLiveSessions(this.live);
    this.store.apply({ kind: 'session.started', session: sessionView(apiId, this.model, telemetry, Date.now()) });
    this.publishTotals(); // the request count moves now, not when the session ends
    let last = 0;
    let done = false;
    // An update inside the window is not dropped but sent when the window ends (a trailing
    // edge), so a session that pauses — a slow or held hop — still shows where it stands.
    let trailing: ReturnType<typeof setTimeout> | undefined;
    const publish = (t: SessionTelemetry) => {
      trailing = undefined;
      last = Date.now();
      this.store.apply({ kind: 'session.updated', session: sessionView(apiId, this.model, t, last) });
    };
    return {
      onUpdate: (t) => {
        if (done || trailing) return;
        const wait = this.updateMs - (Date.now() - last);
        if (wait <= 0) return publish(t);
        trailing = setTimeout(() => !done && publish(t), wait); // `t` is live: it has the latest figures by then
        trailing.unref?.();
      },
      finish: (t) => {
        if (done) return;
        done = true;
        clearTimeout(trailing);
        this.live--;
        if (t.outcome === 'error') this.errors++;
        this.tokensOut += t.completionTokens;
        this.metrics.setLiveSessions(this.live);
        this.metrics.sessionObserved(t);
        this.store.apply({ kind: 'session.finished', session: sessionView(apiId, this.model, t, Date.now()) });
        this.publishTotals();
      },
    };
  }

  /** A request refused before it had a session (counts as an error in the totals). */
  refused(): void {
    this.requests++;
    this.errors++;
    this.publishTotals();
  }

  private publishTotals(): void {
    const tokensPerSecond = this.store.state.sessions.reduce((sum, s) => sum + s.tokensPerSecond, 0);
    this.store.apply({ kind: 'totals', totals: { requests: this.requests, errors: this.errors, tokensOut: this.tokensOut, tokensPerSecond } });
  }
}
