/**
 * Stage marks for one frame's way through the head and the peers (issue #24, "the hop"):
 * `hopMark('peer.run.start')` and the like, at the seams a decode step crosses. A no-op
 * (one check of an unset variable) until a host installs a sink; `bench/hop-stages.ts` has
 * the Node host install one (src/node/hop-trace-file.ts, behind MESHNET_HOP_TRACE)
 * in the head, its workers and the peers, and lines the marks of one token up by time.
 */
let sink: ((stage: string) => void) | undefined;

/**
 * Record that the current frame reached `stage` (nothing when no sink is installed). A
 * `detail` (such as the head worker's op) is joined as `stage.detail` only when a sink is
 * there, so a mark builds no string on the hot path while tracing is off.
 */
export function hopMark(stage: string, detail?: string): void {
  if (sink !== undefined) sink(detail === undefined ? stage : `${stage}.${detail}`);
}

/** Install (or with `undefined`, remove) the function that records marks. */
export function setHopTraceSink(next: ((stage: string) => void) | undefined): void {
  sink = next;
}
