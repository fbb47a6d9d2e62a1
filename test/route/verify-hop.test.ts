/**
 * `--verify` through the Route Session, over real ShardPeers behind in-process links: a peer
 * that echoes its input (well-formed, finite, wrong) goes unnoticed without verification —
 * the tokens are wrong — and with it is caught at its first checked answer, replaced, and
 * quarantined (cause `mismatch`), the tokens those of one process; with a seeded fraction it
 * is caught within the frames the seed gives, and later sessions are exact. The head is the
 * witness; without a witness a check is skipped, not blamed. Plus the comparison itself.
 */
import { describe, expect, it } from 'vitest';
import { HEAD_PEER_ID } from '../../src/core/mesh/plan-route.ts';
import { activationDifference, HopVerifier, toleranceFor, type VerifyResult } from '../../src/core/route/verify-hop.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { createRng } from '../../src/core/sampling/rng.ts';
import { f32ToF16Bits } from '../../src/core/model/dtype.ts';
import { weightSpec, type WeightSpec } from '../../src/core/model/quant/weight-format.ts';
import { Mesh } from '../../src/core/mesh/mesh.ts';
import { meshModel } from '../../src/node/mesh-model.ts';
import { FaultyPeer } from './peer-doubles.ts';
import { collect, createPeer, greedy, inProcessMesh, openSession, PROMPT, useStories } from './route-harness.ts';

const TOKENS = 24;
const stories = useStories('verify-hop', TOKENS);

/** p1, p2 (echoes from its `after + 1`-th frame), p3, and the head as a member that is never planned (a witness). */
function meshWithEcho(after: number, withHead = true, headBudgetLayers = Infinity) {
  let echo!: FaultyPeer;
  const t = inProcessMesh(stories.ctx, 3, (id, peer) => (id === 'p2' ? new InProcessLink((echo = new FaultyPeer(peer, 'echo', after))) : new InProcessLink(peer)));
  if (withHead) t.mesh.addPeer({ id: HEAD_PEER_ID, runtime: 'head', executionProvider: 'cpu', memoryBudgetBytes: Math.min(1 << 30, Math.floor(headBudgetLayers * t.mesh.model.bytesPerLayer)), link: new InProcessLink(createPeer(stories.ctx)) });
  return { t, echo: () => echo };
}

function verifier(t: ReturnType<typeof meshWithEcho>['t'], fraction: number, seed = 7) {
  const results: VerifyResult[] = [];
  return { results, verifier: new HopVerifier({ fraction, source: t.mesh, rng: createRng(seed), onResult: (r) => results.push(r) }) };
}

describe('--verify catches a peer that echoes its input', () => {
  it('without verification the echo goes unnoticed and the tokens are wrong', async () => {
    const { t } = meshWithEcho(2);
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, {}, PROMPT);
    const { ids } = await collect(session);
    expect(ids).not.toEqual(stories.expected);
    expect(session.telemetry.repairs).toEqual([]);
  });

  it('checking every step: caught at its first wrong answer, replaced, quarantined; the tokens are exact', async () => {
    const { t, echo } = meshWithEcho(2);
    const { verifier: v, results } = verifier(t, 1);
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { verifier: v }, PROMPT);
    expect((await collect(session)).ids).toEqual(stories.expected);
    expect(echo().faulted, 'wrong answers it gave before it was caught').toBe(1);
    expect(session.telemetry.repairs).toEqual([expect.objectContaining({ kind: 'replaced', cause: 'mismatch', hop: 1, lostPeerId: 'p2' })]);
    expect(t.mesh.peers.find((p) => p.id === 'p2')!.quarantine?.reason).toMatch(/^mismatch on layers \[2, 4\).*differ from head's replay/);
    expect(results.filter((r) => r === 'mismatch')).toHaveLength(1);
    expect(results.filter((r) => r === 'agreed').length).toBeGreaterThan(TOKENS); // every other step of p1, p3 and the replacement
    await session.closed;
    for (const [id, peer] of t.peers) expect([id, peer.kvEntries]).toEqual([id, 0]);
  });

  it('checking a quarter of the steps (seeded): caught within the frames the seed gives; the next session is exact', async () => {
    const { t, echo } = meshWithEcho(0);
    const { verifier: v } = verifier(t, 0.25, 11);
    const session = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { verifier: v }, PROMPT);
    await collect(session);
    const caught = echo().faulted;
    // P(not caught in n frames) = 0.75^n: 0.75^40 ≈ 1e-5. Seed 11 draws it sooner.
    expect(caught).toBeGreaterThanOrEqual(1);
    expect(caught).toBeLessThanOrEqual(40);
    expect(session.telemetry.repairs.map((r) => r.cause)).toEqual(['mismatch']);
    expect(t.mesh.peers.find((p) => p.id === 'p2')!.quarantine?.reason).toMatch(/^mismatch on layers \[2, 4\)/);
    const next = openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, { verifier: v }, PROMPT);
    expect((await collect(next)).ids).toEqual(stories.expected);
  });

  it('the head witnesses only ranges that fit its memory budget: the others are skipped', async () => {
    // Room for one and a half layers: p3's [4,5) is checked on the head, p1's and p2's [0,2) [2,4) are not.
    const { t, echo } = meshWithEcho(0, true, 1.5);
    const checked: string[] = [];
    const v = new HopVerifier({ fraction: 1, source: t.mesh, rng: createRng(7), onResult: (r, peerId) => checked.push(`${peerId} ${r}`) });
    const session = openSession(stories.ctx, t.provider, greedy(8), undefined, { verifier: v }, PROMPT);
    await collect(session);
    expect(new Set(checked)).toEqual(new Set(['p1 skipped', 'p2 skipped', 'p3 agreed']));
    expect(echo().faulted).toBeGreaterThan(0);
    expect(t.mesh.peers.find((p) => p.id === HEAD_PEER_ID)!.ranges).toEqual([{ start: 4, end: 5 }]);
  });

  it('with no witness (no head, no other holder of the range) a check is skipped, never blamed on the hop', async () => {
    const { t } = meshWithEcho(Infinity, false);
    const { verifier: v, results } = verifier(t, 1);
    const session = openSession(stories.ctx, t.provider, greedy(8), undefined, { verifier: v }, PROMPT);
    await collect(session);
    expect(results.length).toBeGreaterThan(0);
    expect(new Set(results)).toEqual(new Set(['skipped']));
    expect(session.telemetry.repairs).toEqual([]);
  });
});

describe('honest peers are never blamed', () => {
  /** Three honest peers serving `weights`, and the head (same format) as the witness. */
  function honestMesh(weights: WeightSpec, echoing?: FaultyPeer[]) {
    const mesh = new Mesh(meshModel(stories.ctx.model, 'stories260k', 'fp32', weights), { headLayers: 'none' });
    for (const id of ['p1', 'p2', 'p3', HEAD_PEER_ID]) {
      const peer = createPeer(stories.ctx);
      const link = new InProcessLink(echoing && id === 'p2' ? echoing[echoing.push(new FaultyPeer(peer, 'echo', 2)) - 1]! : peer);
      mesh.addPeer({ id, runtime: id === HEAD_PEER_ID ? 'head' : 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link, weightFormats: ['fp32', 'fp16', 'q8', 'q4'] });
    }
    return mesh;
  }

  it('with the looser int8 tolerance an echo is still caught at its first wrong answer', async () => {
    const weights = weightSpec('fp32', { format: 'q4', accuracyLevel: 4 });
    const expectedQ4 = (await collect(openSession(stories.ctx, honestMesh(weights), greedy(TOKENS), undefined, {}, PROMPT))).ids;
    const echoing: FaultyPeer[] = [];
    const mesh = honestMesh(weights, echoing);
    const v = new HopVerifier({ fraction: 1, source: mesh, rng: createRng(3) });
    const session = openSession(stories.ctx, mesh, greedy(TOKENS), undefined, { verifier: v }, PROMPT);
    expect((await collect(session)).ids).toEqual(expectedQ4);
    expect(echoing[0]!.faulted).toBe(1);
    expect(session.telemetry.repairs.map((r) => r.cause)).toEqual(['mismatch']);
  });

  // Long enough for the int8 rounding jumps to show: q8 level 4's first is at step 38 (seed-free: greedy).
  const HONEST_TOKENS = 48;
  for (const [name, weights] of [
    ['q8 (accuracy level 4)', weightSpec('fp32', { format: 'q8' })],
    ['q4, accuracy level 4 (int8 activations)', weightSpec('fp32', { format: 'q4', accuracyLevel: 4 })],
    ['q4, accuracy level 0', weightSpec('fp32', { format: 'q4', accuracyLevel: 0 })],
  ] as const) {
    it(`${name} weights: every step checked agrees with its replay (prefill against step by step), tokens as unchecked`, async () => {
      const unchecked = await collect(openSession(stories.ctx, honestMesh(weights), greedy(HONEST_TOKENS), undefined, {}, PROMPT));
      const mesh = honestMesh(weights);
      const results: VerifyResult[] = [];
      const v = new HopVerifier({ fraction: 1, source: mesh, rng: createRng(3), onResult: (r) => results.push(r) });
      const session = openSession(stories.ctx, mesh, greedy(HONEST_TOKENS), undefined, { verifier: v }, PROMPT);
      expect((await collect(session)).ids).toEqual(unchecked.ids);
      // Every step of every hop is checked: one per token, fewer steps where prompt lookup's drafts were kept.
      expect(results.length).toBeGreaterThanOrEqual(3 * session.telemetry.speculation!.steps);
      expect(new Set(results)).toEqual(new Set(['agreed']));
      expect(session.telemetry.repairs).toEqual([]);
      expect(mesh.peers.filter((p) => p.quarantine).map((p) => p.id)).toEqual([]);
    });
  }
});

describe('the comparison', () => {
  const block = (values: number[]) => ({ dtype: 'fp32' as const, data: Float32Array.from(values), tokens: 1, hiddenSize: values.length });
  it('is relative to the larger of 1 and the reference’s magnitude; shapes that differ never agree', () => {
    expect(activationDifference(block([1, 2, 3]), block([1, 2, 3]))).toBe(0);
    expect(activationDifference(block([1, 2, 3.5]), block([1, 2, 3]))).toBeCloseTo(0.5 / 3, 6);
    expect(activationDifference(block([0.001, 0]), block([0, 0]))).toBeCloseTo(0.001, 6);
    expect(activationDifference(block([1, 2]), block([1, 2, 3]))).toBe(Infinity);
    expect(activationDifference(block([Number.NaN, 2]), block([1, 2]))).toBe(Infinity);
    const fp16 = (values: number[]) => ({ dtype: 'fp16' as const, data: Uint16Array.from(values.map(f32ToF16Bits)), tokens: 1, hiddenSize: values.length });
    expect(activationDifference(fp16([1, 2]), fp16([1, 2.5]))).toBeCloseTo(0.2, 3);
  });

  it('tolerance: the loosest of the two runtimes, at least the fp16 one for fp16', () => {
    expect(toleranceFor(['cpu', 'cpu'], 'fp32')).toBe(1e-3);
    expect(toleranceFor(['cpu', 'webgpu'], 'fp32')).toBe(5e-3);
    expect(toleranceFor(['cpu', 'some-npu'], 'fp32')).toBe(1e-2);
    expect(toleranceFor(['cpu', 'cpu'], 'fp16')).toBe(3e-2);
    const q4 = (accuracyLevel: 0 | 4) => ({ format: 'q4' as const, blockSize: 32, accuracyLevel });
    expect(toleranceFor(['cpu', 'cpu'], 'fp32', [q4(4), q4(4)]), 'int8 activations').toBe(5e-2);
    expect(toleranceFor(['cpu', 'cpu'], 'fp32', [q4(0), q4(0)])).toBe(1e-3);
    expect(toleranceFor(['cpu', 'cpu'], 'fp32', [{ format: 'fp32', blockSize: 0, accuracyLevel: 0 }, undefined])).toBe(1e-3);
  });
});
