/**
 * Speculation and batching compose: greedy sessions drafting by prompt lookup, run together so
 * that BatchingLink folds their steps (speculative ones of several positions among them) into
 * batched frames and BatchingHeadRunner scores their positions in shared LM head runs, give
 * exactly the tokens each gives alone without speculation. Sampled sessions give what they
 * give alone with the same seed and mode. A gated first hop makes the first batch certain.
 */
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { decodeBatchFrame, isBatchFrame } from '../../src/core/frames/batch-frame-codec.ts';
import { BatchingHeadRunner } from '../../src/core/runtime/batching-head.ts';
import { RouteSession } from '../../src/core/route/route-session.ts';
import type { RouteProvider } from '../../src/core/mesh/route-provider.ts';
import type { HeadRunner } from '../../src/core/runtime/ort-head-runner.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';
import { validateSamplingParams, type SamplingParams } from '../../src/core/sampling/index.ts';
import type { SpeculateMode } from '../../src/core/speculation/drafter.ts';
import type { ControlMessage } from '../../src/shared/control.ts';
import { GateLink } from './peer-doubles.ts';
import { collect, inProcessMesh, useStories } from './route-harness.ts';

/** Counts what leaves for a peer below the mesh's BatchingLink: batched frames, and their entries of several positions. */
class BatchCounter implements PeerLink {
  batches = 0;
  multiPositionEntries = 0;
  constructor(readonly inner: PeerLink) {}
  get closed(): Promise<void> {
    return this.inner.closed;
  }
  request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    if (isBatchFrame(frame)) {
      this.batches++;
      const batch = decodeBatchFrame(frame);
      if (batch.kind === 'batch') this.multiPositionEntries += batch.entries.filter((e) => !e.error && e.activations.tokens > 1).length;
    }
    return this.inner.request(frame, signal);
  }
  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    return this.inner.control(message, signal);
  }
  close(reason?: string): Promise<void> {
    return this.inner.close(reason);
  }
}

const stories = useStories('speculative-batching');

// Prompts inside stories260k's repetitive golden text, so prompt lookup drafts from the start.
const PROMPTS = [[1], [1, 461], [1, 461, 461, 401], [1, 461, 461, 401, 401, 401]];
const greedy = validateSamplingParams({ temperature: 0, maxTokens: 24 });
const sampled = (seed: number) => validateSamplingParams({ temperature: 0.8, topP: 0.95, seed, maxTokens: 24 });

function session(provider: RouteProvider, promptIds: number[], params: SamplingParams, speculate: SpeculateMode, head: HeadRunner = stories.ctx.head): RouteSession {
  return new RouteSession({ head, route: provider, vocabSize: stories.ctx.model.checkpoint.config.vocabSize, policy: { backoff: { baseMs: 1, maxMs: 5 } } }, { sessionId: randomUUID(), promptIds, params, speculate });
}

it('greedy sessions speculating together in batched frames give the tokens each gives alone without speculation; sampled ones their own seed’s', async () => {
  const plain = inProcessMesh(stories.ctx, 2);
  const expectedGreedy = [];
  for (const prompt of PROMPTS) expectedGreedy.push((await collect(session(plain.provider, prompt, greedy, 'off'))).ids);
  const expectedSampled = [];
  for (const [i, prompt] of PROMPTS.entries()) expectedSampled.push((await collect(session(plain.provider, prompt, sampled(50 + i), 'ngram'))).ids);

  const counters = new Map<string, BatchCounter>();
  const gates = new Map<string, GateLink>();
  const m = inProcessMesh(stories.ctx, 2, (id, peer) => {
    const counter = new BatchCounter(new InProcessLink(peer));
    counters.set(id, counter);
    const gate = new GateLink(counter);
    gates.set(id, gate);
    return gate;
  });
  // Hold the first hop until every session is under way, so their steps leave together.
  const gate = gates.get('p1')!;
  gate.hold(0);
  const head = new BatchingHeadRunner(stories.ctx.head);
  const sessions = [...PROMPTS.map((p) => session(m.provider, p, greedy, 'ngram', head)), ...PROMPTS.map((p, i) => session(m.provider, p, sampled(50 + i), 'ngram', head))];
  const runs = sessions.map((s) => collect(s));
  await gate.held.promise;
  await new Promise((r) => setImmediate(r));
  gate.release();
  const together = (await Promise.all(runs)).map((r) => r.ids);

  expect(together.slice(0, PROMPTS.length)).toEqual(expectedGreedy);
  expect(together.slice(PROMPTS.length)).toEqual(expectedSampled);
  const kept = sessions.reduce((n, s) => n + s.telemetry.speculation!.accepted, 0);
  expect(kept).toBeGreaterThan(10);
  const counts = [...counters.values()];
  expect(counts.reduce((n, c) => n + c.batches, 0)).toBeGreaterThan(0);
  // Speculative steps (a token plus its drafts) travelled inside batched frames.
  expect(counts.reduce((n, c) => n + c.multiPositionEntries, 0)).toBeGreaterThan(0);
  expect(head.stats.batchedRows).toBeGreaterThan(0);
  await m.provider.allClosed();
  for (const peer of m.peers.values()) expect(peer.kvEntries).toBe(0);
}, 120_000);
