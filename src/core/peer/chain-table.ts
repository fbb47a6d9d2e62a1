/**
 * A peer's chained routes (protocol 3.2): for each session and layer range, who may send it
 * chain frames and where its output goes next — only what the head named in a `chain`
 * message on its own link. A frame from anyone else is refused; an address in a frame is
 * never dialled (frames carry none). Bounded: a head that names more routes than the table
 * holds gets `route_unavailable`, never unbounded memory.
 */
import { ProtocolError } from '../../shared/protocol-error.ts';
import type { LayerRange } from '../model/types.ts';

/** The next hop of a chained route, as the head named it. */
export interface ChainHop {
  readonly peerId: string;
  readonly range: LayerRange;
  /** Where to dial it (absent: a link to it exists already, or it dials this peer). */
  readonly url?: string;
}

/** One session's route on one of this peer's ranges. */
export interface ChainEntry {
  /** The only sender whose chain frames are accepted: `head` or the previous hop's peer id. */
  readonly from: string;
  /** Where the output goes next; absent: only to the head (the end of a segment). */
  readonly to?: ChainHop;
  /** Protocol 3.4: outputs may leave as lanes of one frame with other sessions' (kinds 8 and 9). */
  readonly lanes?: boolean;
}

/** The id a chain frame's sender has when it is the head (on the head's own link). */
export const HEAD_SENDER = 'head';

/** Most routes one peer keeps (sessions × ranges); a release frees a session's. */
export const MAX_CHAIN_ENTRIES = 4096;

/** The key of one session's route on one range: `sessionId/start-end`. */
export const chainKey = (sessionId: string, range: LayerRange) => `${sessionId}/${range.start}-${range.end}`;
const key = chainKey;

export class ChainTable {
  private readonly entries = new Map<string, ChainEntry>();
  private readonly bySession = new Map<string, Set<string>>();

  constructor(private readonly capacity = MAX_CHAIN_ENTRIES) {}

  get size(): number {
    return this.entries.size;
  }

  /** Name (or rename) the route of `sessionId` on `range`. */
  set(sessionId: string, range: LayerRange, entry: ChainEntry): void {
    const k = key(sessionId, range);
    if (!this.entries.has(k) && this.entries.size >= this.capacity) {
      throw new ProtocolError('route_unavailable', `this peer already holds ${this.capacity} chained routes`, { sessionId });
    }
    this.entries.set(k, entry);
    let keys = this.bySession.get(sessionId);
    if (!keys) this.bySession.set(sessionId, (keys = new Set()));
    keys.add(k);
  }

  /** Whether a route is named under `chainKey(sessionId, range)`. */
  has(key: string): boolean {
    return this.entries.has(key);
  }

  get(sessionId: string, range: LayerRange): ChainEntry | undefined {
    return this.entries.get(key(sessionId, range));
  }

  /**
   * The route a chain frame from `sender` for `sessionId` on `range` follows; a
   * ProtocolError('unauthorized') when the head named no route there or another sender.
   */
  admit(sessionId: string, range: LayerRange, sender: string, requestId?: number): ChainEntry {
    const entry = this.entries.get(key(sessionId, range));
    const context = { sessionId, requestId };
    const where = `layers [${range.start}, ${range.end})`;
    if (!entry) throw new ProtocolError('unauthorized', `no chained route for session ${sessionId} on ${where}: the head named none`, context);
    if (entry.from !== sender) throw new ProtocolError('unauthorized', `a chain frame for session ${sessionId} on ${where} came from ${sender}; the head named ${entry.from}`, context);
    return entry;
  }

  /** Forget every route of `sessionId` (its release). */
  release(sessionId: string): void {
    for (const k of this.bySession.get(sessionId) ?? []) this.entries.delete(k);
    this.bySession.delete(sessionId);
  }
}
