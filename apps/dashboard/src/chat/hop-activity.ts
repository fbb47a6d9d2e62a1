/**
 * The route at work, per hop, from the session views `/api/events` sends (about every
 * 100 ms): frames so far, latency, the tokens per second passing through the hop over the
 * last second, and whether frames passed just now (the hop "lights up"). Pure: the caller
 * gives the clock.
 */
import type { SessionHopView, SessionView } from '../../../../src/shared/dashboard-state.ts';

/** A hop counts as lit for this long after its frame count last grew. */
export const LIT_MS = 350;
/** Tokens per second are measured over this window of samples. */
const WINDOW_MS = 1000;

export interface HopLive extends SessionHopView {
  readonly index: number;
  readonly tokensPerSecond: number;
  readonly lit: boolean;
  /** The peer this hop lost, when a repair replaced it. */
  readonly replaced?: string;
}

interface Sample {
  readonly at: number;
  readonly tokens: number;
}

interface HopTrack {
  samples: Sample[];
  frames: number;
  grewAt: number;
  tokensPerSecond: number;
}

export class HopActivity {
  private tracks: HopTrack[] = [];
  private sessionId: string | undefined;

  /** Fold the latest view of the followed session (a new session id starts over). */
  update(session: SessionView, at: number): void {
    if (session.id !== this.sessionId) {
      this.sessionId = session.id;
      this.tracks = [];
    }
    session.hops.forEach((hop, index) => {
      const track = (this.tracks[index] ??= { samples: [], frames: 0, grewAt: -Infinity, tokensPerSecond: 0 });
      if (hop.frames > track.frames) track.grewAt = at;
      track.frames = hop.frames;
      track.samples = [...track.samples.filter((s) => at - s.at <= WINDOW_MS), { at, tokens: hop.tokens }];
      const first = track.samples[0]!;
      const span = at - first.at;
      if (span > 0) track.tokensPerSecond = ((hop.tokens - first.tokens) * 1000) / span;
    });
  }

  /** Each hop of `session` as the route panel shows it at `now`. */
  view(session: SessionView, now: number): HopLive[] {
    return session.hops.map((hop, index) => {
      const track = this.sessionId === session.id ? this.tracks[index] : undefined;
      const replaced = [...session.repairs].reverse().find((r) => r.kind === 'replaced' && r.hop === index)?.lostPeerId;
      return {
        ...hop,
        index,
        tokensPerSecond: track?.tokensPerSecond ?? 0,
        lit: session.state === 'running' && track !== undefined && now - track.grewAt <= LIT_MS,
        ...(replaced !== undefined ? { replaced } : {}),
      };
    });
  }
}
