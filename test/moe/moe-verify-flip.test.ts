/**
 * Flip-tolerant --verify on MoE hops (route/verify-hop.ts, STEP_REPLAY). A Qwen3-MoE whose
 * routers are near-tied by construction (every expert's router row one shared row plus 1e-6 of
 * its own: the experts' scores differ by about float rounding) is served by three honest
 * in-process peers, the head the witness, every step checked: the prefill replay picks other
 * experts than the peers' decode steps did (a real routing flip, 0.06–0.16 of the output's
 * scale), so the prefill comparison alone blames honest peers — and with the step-by-step
 * second replay none is blamed and the tokens are the unchecked ones. Liars on the same
 * near-tied model — an echo, random finite values, NaN — are still caught at their first
 * wrong answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEAD_PEER_ID } from '../../src/core/mesh/plan-route.ts';
import { Mesh } from '../../src/core/mesh/mesh.ts';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';
import { HopVerifier, type VerifyResult } from '../../src/core/route/verify-hop.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { createRng } from '../../src/core/sampling/rng.ts';
import { meshModel } from '../../src/node/mesh-model.ts';
import { tinyMoeCheckpoint } from '../fixtures/moe-checkpoints.ts';
import { fixtureModel, tempDir } from '../engine/harness.ts';
import { FaultyPeer, type PeerFault } from '../route/peer-doubles.ts';
import { collect, createPeer, greedy, openContext, openSession, type StoriesContext } from '../route/route-harness.ts';

const TOKENS = 10;
const PROMPT = [1, 45, 67, 89, 123, 20, 31, 17, 64];
let root: { dir: string; remove: () => Promise<void> };
let ctx: StoriesContext;
/** The tokens without verification. */
let unchecked: number[];
beforeAll(async () => {
  root = await tempDir('moe-verify-flip');
  process.env.MESHNET_HOME = `${root.dir}/home`;
  const model = await fixtureModel(root.dir, 'near-tie', tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'F32', seed: 95, numExperts: 16, topK: 4, nearTie: 1e-6 }));
  ctx = await openContext(model.directory);
  unchecked = (await collect(openSession(ctx, mesh().mesh, greedy(TOKENS), undefined, {}, PROMPT, 'off'))).ids;
});
afterAll(async () => {
  await ctx?.head.dispose();
  await root?.remove();
});

/** p1, p2, p3 serving the near-tied model (p2 with `fault` from its third frame), the head a witness that is never planned. */
function mesh(fault?: PeerFault) {
  const m = new Mesh(meshModel(ctx.model, 'near-tie', 'fp32', weightSpec('fp32')), { headLayers: 'none', warmUpFrames: false });
  let faulty: FaultyPeer | undefined;
  for (const id of ['p1', 'p2', 'p3', HEAD_PEER_ID]) {
    const peer = createPeer(ctx);
    const link = new InProcessLink(fault && id === 'p2' ? (faulty = new FaultyPeer(peer, fault, 2)) : peer);
    m.addPeer({ id, runtime: id === HEAD_PEER_ID ? 'head' : 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link });
  }
  return { mesh: m, faulty: () => faulty };
}

function verifier(m: Mesh, stepReplay: boolean) {
  const results: { result: VerifyResult; detail: string }[] = [];
  return { results, v: new HopVerifier({ fraction: 1, source: m, rng: createRng(5), stepReplay, onResult: (result, _peer, detail) => results.push({ result, detail }) }) };
}

describe('--verify on near-tied MoE routers', () => {
  it('the prefill replay alone blames honest peers (a real routing flip); with the step-by-step replay none is blamed and the tokens are unchanged', async () => {
    const old = mesh();
    const blamed = verifier(old.mesh, false);
    const first = openSession(ctx, old.mesh, greedy(4), undefined, { verifier: blamed.v, maxReplacements: 10 }, PROMPT, 'off');
    await collect(first).catch(() => undefined); // may run out of peers: every honest one gets blamed
    const mismatches = blamed.results.filter((r) => r.result === 'mismatch');
    expect(mismatches.length, 'honest peers blamed by the prefill comparison').toBeGreaterThan(0);
    expect(mismatches[0]!.detail).toMatch(/differ from head's replay/);

    const fixed = mesh();
    const tolerant = verifier(fixed.mesh, true);
    const session = openSession(ctx, fixed.mesh, greedy(TOKENS), undefined, { verifier: tolerant.v }, PROMPT, 'off');
    expect((await collect(session)).ids).toEqual(unchecked);
    expect(tolerant.results.filter((r) => r.result !== 'agreed').map((r) => r.detail).slice(0, 2)).toEqual([]);
    const explained = tolerant.results.filter((r) => /step-by-step replay/.test(r.detail));
    console.log(`near-tie verify: ${explained.length} of ${tolerant.results.length} checks agreed only on the step-by-step replay; e.g. ${explained[0]?.detail}`);
    expect(explained.length, 'checks whose prefill replay flipped').toBeGreaterThan(0);
    expect(session.telemetry.repairs).toEqual([]);
    expect(fixed.mesh.peers.filter((p) => p.quarantine).map((p) => p.id)).toEqual([]);
  });

  for (const fault of ['echo', 'random', 'nan'] as const) {
    it(`a peer answering ${fault} is still caught at its first wrong answer and replaced; the tokens are the honest ones`, async () => {
      const { mesh: m, faulty } = mesh(fault);
      const { v } = verifier(m, true);
      const session = openSession(ctx, m, greedy(TOKENS), undefined, { verifier: v }, PROMPT, 'off');
      expect((await collect(session)).ids).toEqual(unchecked);
      expect(faulty()!.faulted).toBe(1);
      expect(session.telemetry.repairs.map((r) => [r.lostPeerId, r.cause])).toEqual([['p2', fault === 'nan' ? expect.any(String) : 'mismatch']]);
      expect(m.peers.find((p) => p.id === 'p2')!.quarantine).toBeDefined();
    });
  }
});
