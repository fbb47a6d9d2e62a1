/**
 * One session's speculation: its mode, its drafter, the draft length it adapts from its own
 * acceptance rate, and its counts (the dashboard's acceptance rate and tokens per round trip).
 * A drafter that fails (the draft model's worker died) turns speculation off for the rest of
 * the session instead of failing the request: drafts only ever save time.
 */
import { DraftLength, type DraftLengthPolicy } from './draft-length.ts';
import type { DraftToken, Drafter, SpeculateMode } from './drafter.ts';

/** What a session reports about its speculation (plain data, in SessionTelemetry). */
export interface SpeculationTelemetry {
  readonly mode: SpeculateMode;
  /** Draft length chosen for the last step. */
  k: number;
  /** Steps through the route (round trips), the prefill included. */
  steps: number;
  /** Drafted tokens verified, and how many of them were kept. */
  drafted: number;
  accepted: number;
  /** Why speculation stopped, when its drafter failed. */
  error?: string;
}

export class Speculation {
  readonly telemetry: SpeculationTelemetry;
  private readonly length: DraftLength;
  private drafter: Drafter | undefined;

  constructor(mode: SpeculateMode, drafter: Drafter | undefined, policy?: Partial<DraftLengthPolicy>) {
    this.telemetry = { mode, k: 0, steps: 0, drafted: 0, accepted: 0 };
    this.drafter = mode === 'off' ? undefined : drafter;
    this.length = new DraftLength(policy);
  }

  /**
   * Drafts for the step after `context`, at most `room` of them (what the answer can still
   * take). Empty when speculation is off, when the adaptive length says drafts do not pay, or
   * when the drafter has no guess.
   */
  async propose(context: readonly number[], room: number, signal?: AbortSignal): Promise<DraftToken[]> {
    if (!this.drafter || room < 1) return [];
    const k = Math.min(this.length.next(), room);
    this.telemetry.k = k;
    if (k === 0) return [];
    try {
      return (await this.drafter.draft(context, k, signal)).slice(0, k);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      this.telemetry.error = `drafting failed, speculation is off for this session: ${error instanceof Error ? error.message : String(error)}`;
      const drafter = this.drafter;
      this.drafter = undefined;
      void drafter.close().catch(() => undefined);
      return [];
    }
  }

  /** A step went through the route with `drafted` drafts, of which the first `kept` were kept. */
  record(drafted: number, kept: number): void {
    this.telemetry.steps++;
    this.telemetry.drafted += drafted;
    this.telemetry.accepted += kept;
    this.length.record(drafted, kept);
  }

  /** Estimated probability that a draft is kept (the adaptive length's). */
  get acceptance(): number {
    return this.length.acceptance;
  }

  async close(): Promise<void> {
    const drafter = this.drafter;
    this.drafter = undefined;
    await drafter?.close();
  }
}
