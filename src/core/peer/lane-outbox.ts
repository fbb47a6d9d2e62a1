/**
 * LaneOutbox (protocol 3.4): a hop's chained outputs that may travel as lanes leave at the end
 * of the turn they were made in, one frame per link — every output bound for the same next
 * hop and range as one `chain-lanes` frame (kind 8), every copy of one range as one
 * `copy-lanes` frame (kind 9) to the head; a lone output leaves as the kind 6 / kind 7 frame
 * it would have been. The outputs of one batched shard run resolve in one turn, so they leave
 * together. No timer: nothing waits for work that is not ready (`nextTurn`). Forwards leave
 * before copies (the critical path first), and a session's outputs leave in the order they
 * were made (a second output of one session flushes the first at once).
 */
import type { LayerRange } from '../model/types.ts';
import { encodeFrame } from '../frames/frame-codec.ts';
import { encodeLaneFrame, MAX_LANES, type Lane } from '../frames/lane-frame-codec.ts';
import { nextTurn } from '../runtime/next-turn.ts';

export interface LaneOutput {
  /** The range that made it (the copy's range). */
  readonly range: LayerRange;
  /** The next hop it is forwarded to; absent: it is only copied to the head. */
  readonly to?: { readonly peerId: string; readonly range: LayerRange };
  readonly lane: Lane;
}

export interface LaneSinks {
  /** Hand `frame` (carrying `lanes`) to the link to `peerId`; may throw when that link is gone. */
  forward(peerId: string, frame: Uint8Array, lanes: readonly Lane[]): void;
  /** Hand a copy frame to the head. */
  copy(frame: Uint8Array): void;
}

export class LaneOutbox {
  private pending: LaneOutput[] = [];
  private scheduled = false;

  constructor(private readonly sinks: LaneSinks) {}

  push(output: LaneOutput): void {
    if (this.pending.some((p) => p.lane.sessionId === output.lane.sessionId)) this.flush();
    this.pending.push(output);
    if (this.scheduled) return;
    this.scheduled = true;
    nextTurn(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  /** Send everything pending now. */
  flush(): void {
    const out = this.pending;
    this.pending = [];
    const forwards = groups(out.filter((o) => o.to !== undefined), (o) => `${o.to!.peerId}\n${rangeKey(o.to!.range)}\n${shapeKey(o.lane)}`);
    for (const group of forwards) {
      const to = group[0].to!;
      const lanes = group.map((o) => o.lane);
      this.sinks.forward(to.peerId, frameOf('chain', to.range, lanes), lanes);
    }
    for (const group of groups(out, (o) => `${rangeKey(o.range)}\n${shapeKey(o.lane)}`)) {
      this.sinks.copy(frameOf('copy', group[0].range, group.map((o) => o.lane)));
    }
  }
}

const rangeKey = (r: LayerRange) => `${r.start}-${r.end}`;
const shapeKey = (l: Lane) => `${l.activations.dtype}/${l.activations.hiddenSize}`;

/** `items` grouped by key, in first-seen order, each group at most MAX_LANES long. */
function groups<T>(items: readonly T[], key: (item: T) => string): T[][] {
  const byKey = new Map<string, T[][]>();
  const out: T[][] = [];
  for (const item of items) {
    const k = key(item);
    const list = byKey.get(k) ?? [];
    if (list.length === 0) byKey.set(k, list);
    let last = list.at(-1);
    if (!last || last.length >= MAX_LANES) {
      list.push((last = []));
      out.push(last);
    }
    last.push(item);
  }
  return out;
}

function frameOf(kind: 'chain' | 'copy', range: LayerRange, lanes: readonly Lane[]): Uint8Array {
  if (lanes.length === 1) {
    const l = lanes[0];
    return encodeFrame({ kind, requestId: l.requestId, sessionId: l.sessionId, startPosition: l.startPosition, range, activations: l.activations });
  }
  const { dtype, hiddenSize } = lanes[0].activations;
  return encodeLaneFrame({ kind: kind === 'chain' ? 'chain-lanes' : 'copy-lanes', range, dtype, hiddenSize, lanes });
}
