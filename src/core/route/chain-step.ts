/**
 * A step on a chained route (protocol 3.2): head → hop 1 → … → hop N → head. The head posts
 * a segment's first frame (kind chain); each hop runs it, forwards its output to the next hop
 * and sends the head a copy (kind 7). The head takes the copies in hop order: each is checked
 * as a star answer would be (session, start, range, shape, finite values; `--verify`'s sample)
 * and recorded as the next hop's input, so every hop's history — and with it repair — is what
 * a star route would have made. The last hop's copy is the step's answer. Per token that is
 * N + 1 one-way link delays instead of 2·N.
 *
 * When hop k's copy does not come (its deadline: the head knows whose copy is missing), is
 * unusable, or hop k reports a refusal, the step goes on through the head from hop k: hops
 * after k first take frames from the head only (a late frame of the hop being repaired is
 * refused), a hop that hung or sent an unusable copy is replaced (hop-repair.ts), and hops
 * k … N run as star hops from the last good copy — each peer keeps the position rule, so KV a
 * chained frame left behind is cut and rebuilt exactly. Only those hops recompute; the tokens
 * are unchanged.
 *
 * A pipelined prefill block on a route that is one chained segment posts every chunk at once
 * (runChainedPipelined); on a mixed route each segment is a stage of the pipeline
 * (runSegmentsPipelined).
 */
import { encodeFrame } from '../frames/frame-codec.ts';
import type { Activations } from '../runtime/shard-executor.ts';
import { ChainInbox, ChainReportError } from './chain-inbox.ts';
import type { ChainRoute, Segment } from './chain-route.ts';
import { classifyHopFailure, quarantines } from './hop-failure.ts';
import { replace, runRepaired, type RepairContext } from './hop-repair.ts';
import type { Hop } from './hop.ts';
import { runPipelined, type Chunk } from './pipelined-prefill.ts';

export interface ChainStepContext {
  readonly sessionId: string;
  readonly chain: ChainRoute;
  readonly repair: RepairContext;
}

/** `hidden` (positions from `position`) through every hop: chained segments, and single hops through the head. */
export async function runChained(hops: readonly Hop[], hidden: Activations, position: number, signal: AbortSignal, ctx: ChainStepContext): Promise<Activations> {
  let input = hidden;
  for (const segment of ctx.chain.segments(hops.length)) input = await runStage(hops, segment, input, position, signal, ctx);
  return input;
}

/**
 * A pipelined block on a mixed route (several segments: some links chained, some through the
 * head): each segment is one stage of the pipeline — chunk j enters segment s once segment
 * s − 1 gave its output and segment s finished chunk j − 1 — a chained segment run as a chained
 * step (with its own recovery), a lone hop as a star hop. The head forwards a chunk between
 * segments as soon as it has it.
 */
export function runSegmentsPipelined(hops: readonly Hop[], chunks: readonly Chunk[], signal: AbortSignal, ctx: ChainStepContext): Promise<Activations> {
  const segments = ctx.chain.segments(hops.length);
  return runPipelined(chunks, segments.length, (s, chunk, sig) => runStage(hops, segments[s], chunk.activations, chunk.start, sig, ctx), signal);
}

function runStage(hops: readonly Hop[], segment: Segment, input: Activations, position: number, signal: AbortSignal, ctx: ChainStepContext): Promise<Activations> {
  return segment.first === segment.last ? runRepaired(hops[segment.first], input, position, signal, ctx.repair) : runSegment(hops, segment, input, position, signal, ctx);
}

/**
 * A pipelined block on a route that is one chained segment: every chunk is posted to hop 1 at
 * once and flows down the chain (each peer runs a session's frames in order), the copies are
 * taken chunk by chunk, hop by hop. Any failure: the whole block goes through the head
 * pipelined (runPipelined), from its first position. Resolves with the last hop's output of
 * the last chunk.
 */
export async function runChainedPipelined(hops: readonly Hop[], chunks: readonly Chunk[], signal: AbortSignal, ctx: ChainStepContext): Promise<Activations> {
  const last = hops.length - 1;
  const ids = chunks.map(() => ctx.chain.nextRequestId());
  const inbox = new ChainInbox(hops, 0, last, new Set(ids), ctx.sessionId, ctx.repair.clock);
  const start = chunks[0].start;
  try {
    let output: Activations | undefined;
    let since = ctx.repair.clock.now();
    for (const [j, chunk] of chunks.entries()) {
      let input = chunk.activations;
      for (let k = 0; k <= last; k++) {
        try {
          if (j === 0 && k === 0) for (const [i, c] of chunks.entries()) post(hops[0], c.activations, c.start, ids[i], ctx);
          input = await takeCopy(inbox, hops[k], ids[j], input, chunk.start, signal, ctx);
        } catch (error) {
          if (signal.aborted) throw signal.reason;
          for (const hop of hops) hop.rollBack(start);
          await recover(hops, { first: 0, last }, k, error, signal, ctx);
          const run = (hop: number, c: Chunk, s: AbortSignal) => runRepaired(hops[hop], c.activations, c.start, s, ctx.repair);
          return await runPipelined(chunks, hops.length, run, signal);
        }
        const now = ctx.repair.clock.now();
        hops[k].answered(input.tokens, chunk.start, now - since);
        since = now;
        if (k < last) hops[k + 1].history.record(chunk.start, input);
      }
      output = input;
    }
    return output!;
  } finally {
    inbox.close();
  }
}

async function runSegment(hops: readonly Hop[], segment: Segment, input: Activations, position: number, signal: AbortSignal, ctx: ChainStepContext): Promise<Activations> {
  const { first, last } = segment;
  const requestId = ctx.chain.nextRequestId();
  const inbox = new ChainInbox(hops, first, last, new Set([requestId]), ctx.sessionId, ctx.repair.clock);
  try {
    let since = ctx.repair.clock.now();
    let current = input;
    for (let k = first; k <= last; k++) {
      try {
        if (k === first) post(hops[first], input, position, requestId, ctx);
        current = await takeCopy(inbox, hops[k], requestId, current, position, signal, ctx);
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        // Hop k's input is recorded (as it was sent); the star run records it again.
        for (let i = k; i <= last; i++) hops[i].rollBack(position);
        await recover(hops, segment, k, error, signal, ctx);
        for (let i = k; i <= last; i++) current = await runRepaired(hops[i], current, position, signal, ctx.repair);
        return current;
      }
      const now = ctx.repair.clock.now();
      hops[k].answered(current.tokens, position, now - since);
      since = now;
      if (k < last) hops[k + 1].history.record(position, current);
    }
    return current;
  } finally {
    inbox.close();
  }
}

/** Record `input` as `hop`'s and post it as a chain frame (a closed link throws: that hop is lost). */
function post(hop: Hop, input: Activations, position: number, requestId: number, ctx: ChainStepContext): void {
  if (hop.history.length > position) hop.history.truncate(position);
  hop.history.record(position, input);
  const frame = encodeFrame({ kind: 'chain', requestId, sessionId: ctx.sessionId, startPosition: position, range: hop.range, activations: input });
  hop.lease.chain!.port.post(frame);
}

/** Hop `hop`'s copy of step `requestId`, checked as an answer to `sent` and, under `--verify`, sampled. */
async function takeCopy(inbox: ChainInbox, hop: Hop, requestId: number, sent: Activations, position: number, signal: AbortSignal, ctx: ChainStepContext): Promise<Activations> {
  const bytes = await inbox.take(requestId, hop, hop.deadlineMs(sent.tokens), signal);
  const answer = hop.check(bytes, sent, position, 'copy');
  await ctx.repair.verifier?.check({ hop: hop.index, peerId: hop.peerId, range: hop.range, history: hop.history, answer }, signal);
  return answer;
}

/**
 * A chained step failed at hop `k`: hops after it take frames from the head only, and a hop
 * that hung or sent an unusable copy is replaced. A refusal it reported is left to the star
 * run that follows (the frame it refused may have been another hop's fault).
 */
async function recover(hops: readonly Hop[], segment: Segment, k: number, error: unknown, signal: AbortSignal, ctx: ChainStepContext): Promise<void> {
  await ctx.chain.revoke(hops, k + 1, segment.last, signal);
  if (error instanceof ChainReportError) return;
  const failure = classifyHopFailure(error);
  if (failure.kind === 'fatal') throw error;
  if (quarantines(failure)) ctx.repair.route.reportFault?.(hops[k].peerId, hops[k].range, failure);
  await replace(hops[k], 1, failure, signal, ctx.repair);
}
