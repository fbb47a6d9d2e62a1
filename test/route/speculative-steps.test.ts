/**
 * Speculative steps through real ShardPeers (stories260k and aidreams260k shards, in-process
 * links): greedy output equals the golden ids and the output without speculation; drafts are
 * really kept and really rejected; after a partial rejection every hop's history holds exactly
 * what its peer's KV holds, so a cache miss or a lost peer on the very next (speculative) step
 * is rebuilt from the right positions; sampled output is the same for the same seed and mode,
 * whatever happens to the route; logprobs of verified drafts equal those without speculation;
 * the draft model path drafting for itself keeps every draft.
 */
import { POSITION_RULE_MINOR, PROTOCOL_VERSION } from '../../src/shared/protocol.ts';
import { describe, expect, it } from 'vitest';
import { decodeFrame } from '../../src/core/frames/frame-codec.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import type { PeerLink } from '../../src/core/runtime/peer-link.ts';
import { validateSamplingParams, type SamplingParams } from '../../src/core/sampling/index.ts';
import type { Drafter, SpeculateMode } from '../../src/core/speculation/drafter.ts';
import { Drafters } from '../../src/core/speculation/drafters.ts';
import type { ControlMessage } from '../../src/shared/control.ts';
import { configSummary } from '../../src/node/mesh-model.ts';
import { AIDREAMS_DIR, aidreamsGolden, STORIES_GOLDEN } from '../engine/harness.ts';
import { collect, createPeer, greedy, inProcessMesh, oneProcessTokens, openContext, openSession, useStories } from './route-harness.ts';

const stories = useStories('speculative');

/** Frames one hop was sent: start position and positions carried. */
class RecordingLink implements PeerLink {
  readonly frames: { start: number; tokens: number }[] = [];
  constructor(readonly inner: PeerLink) {}
  get closed(): Promise<void> {
    return this.inner.closed;
  }
  request(frame: Uint8Array, signal?: AbortSignal): Promise<Uint8Array> {
    const { startPosition, activations } = decodeFrame(frame);
    this.frames.push({ start: startPosition, tokens: activations.tokens });
    return this.inner.request(frame, signal);
  }
  control(message: ControlMessage, signal?: AbortSignal): Promise<ControlMessage> {
    return this.inner.control(message, signal);
  }
  close(reason?: string): Promise<void> {
    return this.inner.close(reason);
  }
}

/**
 * Drafts the golden continuation of `[1]`, except that in the rounds listed the third draft is
 * wrong: those steps keep two drafts and replace the third (a partial rejection).
 */
class ScriptedDrafters extends Drafters {
  rounds = 0;
  constructor(
    private readonly golden: readonly number[],
    private readonly wrongRounds: ReadonlySet<number>,
  ) {
    super();
  }
  override create(mode: SpeculateMode): Drafter | undefined {
    if (mode === 'off') return undefined;
    return {
      draft: async (context, k) => {
        const round = ++this.rounds;
        const generated = context.length - 1; // the prompt is [1]
        const draft = this.golden.slice(generated, generated + k);
        if (this.wrongRounds.has(round) && draft.length >= 3) draft[2] = (draft[2] + 1) % 512;
        return draft.map((tokenId) => ({ tokenId }));
      },
      close: async () => {},
    };
  }
}

const speculation = (s: { telemetry: { speculation?: { drafted: number; accepted: number; steps: number } } }) => s.telemetry.speculation!;

describe('greedy with speculation', () => {
  for (const hops of [1, 2, 3]) {
    it(`stories260k over ${hops} hop(s) gives the golden ids, drafting by prompt lookup`, async () => {
      const t = inProcessMesh(stories.ctx, hops);
      const session = openSession(stories.ctx, t.provider, greedy());
      const { ids } = await collect(session);
      expect(ids).toEqual(STORIES_GOLDEN);
      const s = speculation(session);
      // The golden text repeats (461 461 401 401 401 461 …, then 431 twelve times): drafts are kept and rejected.
      expect(s.accepted).toBeGreaterThan(5);
      expect(s.drafted).toBeGreaterThan(s.accepted);
      expect(s.steps).toBeLessThan(STORIES_GOLDEN.length);
      await session.closed;
      for (const peer of t.peers.values()) expect(peer.kvEntries).toBe(0);
    });
  }

  it('aidreams260k (the demo) over 2 hops gives its golden 64 ids', async () => {
    const aidreams = await openContext(AIDREAMS_DIR);
    try {
      const t = inProcessMesh(aidreams, 2);
      const session = openSession(aidreams, t.provider, greedy(64));
      const { ids } = await collect(session);
      expect(ids).toEqual(aidreamsGolden().ids);
      expect(speculation(session).accepted).toBeGreaterThan(0);
    } finally {
      await aidreams.head.dispose();
    }
  });

  it("speculate 'off' drafts nothing; a peer older than the position rule gets no draft either", async () => {
    const off = openSession(stories.ctx, inProcessMesh(stories.ctx, 2).provider, greedy(), undefined, {}, [1], 'off');
    expect((await collect(off)).ids).toEqual(STORIES_GOLDEN);
    expect(speculation(off)).toMatchObject({ drafted: 0, steps: 32 });
    // The minor just before the rule (3.0: batched frames, no position rule).
    for (const minor of [POSITION_RULE_MINOR - 1]) {
      const t = inProcessMesh(stories.ctx, 0);
      t.mesh.addPeer({ id: 'old', runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(createPeer(stories.ctx)), protocol: { major: PROTOCOL_VERSION.major, minor } });
      const old = openSession(stories.ctx, t.provider, greedy());
      expect((await collect(old)).ids).toEqual(STORIES_GOLDEN);
      expect(speculation(old).drafted).toBe(0);
    }
  });
});

describe('logprobs with speculation', () => {
  it('each kept or replaced draft carries the logprob and top logprobs its position has without speculation', async () => {
    const withLogprobs = greedy(32, { logprobs: true, topLogprobs: 3 });
    const events = async (speculate: SpeculateMode) => {
      const session = openSession(stories.ctx, inProcessMesh(stories.ctx, 2).provider, withLogprobs, undefined, {}, [1], speculate);
      const tokens = [];
      for await (const event of session) if (event.type === 'token') tokens.push(event);
      return { tokens, speculation: speculation(session) };
    };
    const plain = await events('off');
    const spec = await events('ngram');
    expect(spec.speculation.accepted).toBeGreaterThan(5); // several tokens came from verified drafts
    expect(spec.tokens.map((t) => t.tokenId)).toEqual(STORIES_GOLDEN);
    spec.tokens.forEach((t, i) => {
      const p = plain.tokens[i];
      // A position scored in a frame of several carries float rounding of its own (~1e-5).
      expect(t.logprob, `token ${i}`).toBeCloseTo(p.logprob, 4);
      expect(t.topLogprobs.map((x) => x.tokenId), `token ${i}`).toEqual(p.topLogprobs.map((x) => x.tokenId));
      t.topLogprobs.forEach((x, j) => expect(x.logprob).toBeCloseTo(p.topLogprobs[j].logprob, 4));
    });
  });
});

describe('history stays exact after a partial rejection', () => {
  // Round 1 drafts 4 tokens at positions 2…5 after g0 at 1: g1 and g2 are kept, the wrong third is
  // replaced by g3. The route holds 6 positions; only 4 count. The next step starts at 4.
  const wrongFirstRound = () => new ScriptedDrafters(STORIES_GOLDEN, new Set([1]));
  // Drafts are cheap here, so the first round already drafts 4.
  const SPECULATIVE = { maxK: 4, costPerDraft: 0.01 };

  it('a cache miss on the next, speculative, step replays exactly the kept positions', async () => {
    const recording = new Map<string, RecordingLink>();
    const t = inProcessMesh(stories.ctx, 3, (id, peer) => {
      const link = new RecordingLink(new InProcessLink(peer));
      recording.set(id, link);
      return link;
    });
    const drafters = wrongFirstRound();
    const session = openSession(stories.ctx, t.provider, greedy(), undefined, { drafters, draftLength: SPECULATIVE });
    const { ids } = await collect(session, (n) => {
      if (n === 4) t.peers.get('p2')!.evictAll(); // right after the partial rejection
    });
    expect(ids).toEqual(STORIES_GOLDEN);
    const p2 = recording.get('p2')!.frames;
    expect(p2.slice(0, 2)).toEqual([{ start: 0, tokens: 1 }, { start: 1, tokens: 5 }]);
    // The next frame starts at 4 (the peer drops positions 4 and 5), misses, and the replay holds exactly 4 + its positions.
    expect(p2[2].start).toBe(4);
    expect(p2[2].tokens).toBeGreaterThan(1); // a speculative step
    expect(p2[3]).toEqual({ start: 0, tokens: 4 + p2[2].tokens });
    expect(session.telemetry.repairs).toEqual([expect.objectContaining({ kind: 'cache_miss', hop: 1, peerId: 'p2', position: 4 + p2[2].tokens })]);
    // The hops that kept their KV were never replayed.
    for (const id of ['p1', 'p3']) expect(recording.get(id)!.frames.filter((f) => f.start === 0)).toHaveLength(1);
  });

  it('a peer lost right after it is rebuilt on its replacement from exactly the kept positions', async () => {
    const recording = new Map<string, RecordingLink>();
    const t = inProcessMesh(stories.ctx, 3, (id, peer) => {
      const link = new RecordingLink(new InProcessLink(peer));
      recording.set(id, link);
      return link;
    });
    const session = openSession(stories.ctx, t.provider, greedy(), undefined, { drafters: wrongFirstRound(), draftLength: SPECULATIVE });
    const { ids } = await collect(session, async (n) => {
      if (n === 4) await recording.get('p3')!.close('peer vanished');
    });
    expect(ids).toEqual(STORIES_GOLDEN);
    const repair = session.telemetry.repairs.find((r) => r.kind === 'replaced')!;
    expect(repair).toMatchObject({ hop: 2, lostPeerId: 'p3' });
    const frames = recording.get(repair.peerId)!.frames;
    const replay = frames.find((f, i) => f.start === 0 && i > 0)!; // its first frame was its own hop's prefill
    expect(recording.get('p1')!.frames.slice(0, 2)).toEqual([{ start: 0, tokens: 1 }, { start: 1, tokens: 5 }]); // the partial rejection
    const step = recording.get('p1')!.frames[2]; // the step that found p3 gone
    expect(step.start).toBe(4);
    expect(replay).toEqual({ start: 0, tokens: 4 + step.tokens });
  });

  it('with several partial rejections and both faults the tokens never change', async () => {
    const t = inProcessMesh(stories.ctx, 3);
    const session = openSession(stories.ctx, t.provider, greedy(), undefined, { drafters: new ScriptedDrafters(STORIES_GOLDEN, new Set([1, 2, 3, 5, 6])), draftLength: SPECULATIVE });
    const { ids } = await collect(session, async (n) => {
      if (n === 7) t.peers.get('p1')!.evictAll();
      if (n === 12) await (t.links.get('p2') as InProcessLink).close('gone');
    });
    expect(ids).toEqual(STORIES_GOLDEN);
    expect(session.telemetry.repairs.map((r) => r.kind).sort()).toEqual(['cache_miss', 'replaced']);
    expect(speculation(session).drafted).toBeGreaterThan(speculation(session).accepted);
  });
});

describe('sampling with speculation', () => {
  const sampled = (extra: Partial<SamplingParams> = {}) => validateSamplingParams({ temperature: 0.9, topP: 0.95, seed: 11, maxTokens: 32, ...extra });

  it('the same seed and mode give the same tokens, whatever happens to the route', async () => {
    const run = async (fault?: (t: ReturnType<typeof inProcessMesh>, n: number) => Promise<void> | void) => {
      const t = inProcessMesh(stories.ctx, 3);
      const session = openSession(stories.ctx, t.provider, sampled(), undefined, {}, [1, 461, 461, 401]);
      return { ids: (await collect(session, fault ? (n) => fault(t, n) : undefined)).ids, speculation: speculation(session) };
    };
    const first = await run();
    expect((await run()).ids).toEqual(first.ids);
    const faulted = await run(async (t, n) => {
      if (n === 6) t.peers.get('p2')!.evictAll();
      if (n === 14) await (t.links.get('p3') as InProcessLink).close('gone');
    });
    expect(faulted.ids).toEqual(first.ids);
    expect(first.speculation.drafted).toBeGreaterThan(0);
  });
});

describe('the draft model path', () => {
  it('stories260k drafting for itself keeps every draft, and its greedy output is the golden ids', async () => {
    const draftPeer = createPeer(stories.ctx);
    const range = { start: 0, end: 5 };
    await draftPeer.handleControl({ kind: 'assign', modelKey: stories.ctx.model.key, model: 'stories260k', range, dtype: 'fp32', artifactUrl: '/unused', config: configSummary(stories.ctx.model) });
    const drafters = new Drafters({ head: stories.ctx.head, link: new InProcessLink(draftPeer), range, vocabSize: 512 });
    const t = inProcessMesh(stories.ctx, 2);
    const session = openSession(stories.ctx, t.provider, greedy(), undefined, { drafters }, [1], 'draft');
    expect((await collect(session)).ids).toEqual(STORIES_GOLDEN);
    const s = speculation(session);
    expect(s.drafted).toBeGreaterThan(20);
    expect(s.accepted).toBe(s.drafted);
    await session.closed;
    expect(draftPeer.kvEntries).toBe(0); // its KV for the session was released
    // Sampled: the same seed gives the same tokens.
    const again = async () => (await collect(openSession(stories.ctx, t.provider, validateSamplingParams({ temperature: 1, seed: 4, maxTokens: 24 }), undefined, { drafters }, [1], 'draft'))).ids;
    expect(await again()).toEqual(await again());
  });
});

describe('the fixture architectures', () => {
  it('greedy with speculation equals greedy without, over 2 hops', async () => {
    const { fixtureModel } = await import('../engine/harness.ts');
    const { TINY_PRESETS } = await import('../fixtures/checkpoints.ts');
    let drafted = 0;
    for (const [name, preset] of Object.entries(TINY_PRESETS)) {
      const model = await fixtureModel(stories.home, name, { ...preset, dtype: 'F32', seed: 21, numLayers: 4 });
      const fixture = await openContext(model.directory);
      try {
        const prompt = [1, 9, 77, 23, 54];
        const plain = await oneProcessTokens(fixture, prompt, 24);
        const session = openSession(fixture, inProcessMesh(fixture, 2).provider, greedy(24), undefined, {}, prompt);
        expect((await collect(session)).ids, name).toEqual(plain);
        drafted += speculation(session).drafted;
      } finally {
        await fixture.head.dispose();
      }
    }
    expect(drafted).toBeGreaterThan(0);
  });
});
