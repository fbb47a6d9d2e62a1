/**
 * ChainRoute: how one session's hops are linked (protocol 3.2). Between two hops the link is
 * direct — hop i forwards its output to hop i + 1 — when both peers run chained routes and
 * hop i + 1 can be reached (a URL the head knows it by, or a link that exists already); else
 * it goes through the head, as in a star route. Hops joined by direct links form a segment;
 * the head posts a segment's first frame and hears every hop's copy (chain-step.ts).
 *
 * `prepare` names each hop's route with a `chain` message on the head's own link: who may send
 * it chain frames (`from`) and where its output goes (`to`). A hop that cannot make its
 * forward link answers with an error: that link then goes through the head, and the route is
 * named again. The route is named once per set of peers; a repair (another peer on a hop)
 * names it again before the next chained step. On a segment whose peers all read lane frames
 * (protocol 3.4) each hop is named with `lanes`: its outputs may leave as one frame per link
 * with other sessions'. Mode `star` never chains; `chain` and `auto`
 * chain wherever the links can be made (the CLI's `auto` is the default once chains run
 * end to end).
 */
import type { ChainMessage } from '../../shared/control.ts';
import type { Clock } from '../runtime/clock.ts';
import { withDeadline } from '../runtime/deadline.ts';
import type { Hop } from './hop.ts';

export type RouteMode = 'star' | 'chain' | 'auto';
/** How a link between two hops flows: hop to hop, or through the head. */
export type ChainLink = 'direct' | 'head';
export const ROUTE_MODES: readonly RouteMode[] = ['star', 'chain', 'auto'];

/** The sender name of the head in `chain.from`. */
const HEAD = 'head';

export interface ChainRouteOptions {
  readonly sessionId: string;
  readonly clock: Clock;
  readonly mode: RouteMode;
  /** How long a `chain` answer may take (dialling the next hop included); default 10 s. */
  readonly setupTimeoutMs?: number;
}

/** A run of hops `[first, last]` joined by direct links (first === last: one hop, reached by the head). */
export interface Segment {
  readonly first: number;
  readonly last: number;
}

export class ChainRoute {
  /** `direct[i]`: hop i forwards to hop i + 1. */
  private direct: boolean[] = [];
  /** The peers the route was named for (hop by hop); undefined: name it again. */
  private namedFor: string | undefined;
  private lastRequestId = 0;

  constructor(private readonly options: ChainRouteOptions) {}

  /** Whether `hops` can take a chained step now (named as needed): some link is direct and no hop waits to be rebuilt. */
  async prepare(hops: readonly Hop[], signal: AbortSignal): Promise<boolean> {
    if (this.options.mode === 'star' || hops.length < 2 || hops.some((h) => h.stale)) return false;
    const ids = hops.map((h) => h.peerId).join('\n');
    if (ids !== this.namedFor) {
      this.direct = hops.slice(0, -1).map((hop, i) => canLink(hop, hops[i + 1]));
      await this.name(hops, signal);
      this.namedFor = ids;
    }
    return this.direct.some(Boolean);
  }

  /** The segments of the route as last named. */
  segments(hops: number): Segment[] {
    const out: Segment[] = [];
    for (let first = 0; first < hops; ) {
      let last = first;
      while (last < hops - 1 && this.direct[last]) last++;
      out.push({ first, last });
      first = last + 1;
    }
    return out;
  }

  /** How each link between hops flows on a step `prepare` answered `chained` for: `direct` (hop to hop) or `head` (through the head). */
  links(hops: number, chained: boolean): ChainLink[] {
    return Array.from({ length: Math.max(0, hops - 1) }, (_, i) => (chained && this.direct[i] ? 'direct' : 'head'));
  }

  /** A fresh request id for one chained step (u32, never 0). */
  nextRequestId(): number {
    this.lastRequestId = this.lastRequestId >= 0xffffffff ? 1 : this.lastRequestId + 1;
    return this.lastRequestId;
  }

  /**
   * After a failed chained step: hops `from…` of a segment accept frames from the head only
   * (a late frame from the hop being repaired is refused), and the route is named again before
   * the next chained step. Answers are awaited (they precede the repair's frames on each link);
   * failures are ignored — the repair's own frames find out.
   */
  async revoke(hops: readonly Hop[], from: number, to: number, signal: AbortSignal): Promise<void> {
    this.namedFor = undefined;
    const asks = [];
    for (let i = from; i <= to; i++) asks.push(this.ask(hops[i], { from: HEAD }, signal).catch(() => undefined));
    await Promise.all(asks);
  }

  /** Send each hop in a segment of two or more its `chain`; a forward link that fails goes through the head, and the route is named again. */
  private async name(hops: readonly Hop[], signal: AbortSignal): Promise<void> {
    for (let round = 0; round < hops.length; round++) {
      const failed: number[] = [];
      const lanes = this.laneHops(hops);
      await Promise.all(
        hops.map(async (hop, i) => {
          const fromPrev = i > 0 && this.direct[i - 1];
          const toNext = i < hops.length - 1 && this.direct[i];
          if (!fromPrev && !toNext) return;
          const next = hops[i + 1];
          const to = toNext ? { peerId: next.peerId, range: next.range, ...(next.lease.chain?.url !== undefined && { url: next.lease.chain.url }) } : undefined;
          try {
            await this.ask(hop, { from: fromPrev ? hops[i - 1].peerId : HEAD, ...(to && { to }), ...(lanes[i] && { lanes: true }) }, signal);
          } catch (error) {
            signal.throwIfAborted();
            // This hop cannot forward (or take chained frames at all): both its links go through the head.
            failed.push(i);
            void error;
          }
        }),
      );
      if (failed.length === 0) return;
      for (const i of failed) {
        if (i > 0) this.direct[i - 1] = false;
        if (i < this.direct.length) this.direct[i] = false;
      }
    }
  }

  /** Per hop: whether it may send lane frames (3.4) — every peer of its chained segment reads them. */
  private laneHops(hops: readonly Hop[]): boolean[] {
    const out = hops.map(() => false);
    for (const { first, last } of this.segments(hops.length)) {
      const all = hops.slice(first, last + 1).every((h) => h.lease.chain?.lanes === true);
      for (let i = first; i <= last; i++) out[i] = all && last > first;
    }
    return out;
  }

  private ask(hop: Hop, route: Pick<ChainMessage, 'from' | 'to' | 'lanes'>, signal: AbortSignal) {
    const { sessionId, clock } = this.options;
    const timeoutMs = this.options.setupTimeoutMs ?? 10_000;
    const message: ChainMessage = { kind: 'chain', sessionId, range: hop.range, ...route };
    return withDeadline(clock, timeoutMs, () => new Error(`no 'chained' within ${timeoutMs} ms`), (s) => hop.lease.link.control(message, s), signal);
  }
}

/** Whether `hop` can forward straight to `next`: both run chained routes and `next` can be reached. */
function canLink(hop: Hop, next: Hop): boolean {
  const a = hop.lease.chain;
  const b = next.lease.chain;
  return a !== undefined && b !== undefined && (b.url !== undefined || b.dialable === true);
}
