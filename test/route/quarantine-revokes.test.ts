/**
 * A quarantine reaches every session the peer serves, not only the one that caught it: when
 * one session reports a peer (here as `--verify` would, a mismatch), the other live sessions
 * stop sending it frames, replace that hop and rebuild it from history with their tokens
 * unchanged, and their `release` still reaches the peer, so it keeps no KV. Real ShardPeers
 * behind in-process links; the report is made mid-stream through the mesh's own interface.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { tempDir } from '../engine/harness.ts';
import { CountingLink } from './peer-doubles.ts';
import { collect, greedy, inProcessMesh, oneProcessTokens, openSession, openStories, PROMPT, type StoriesContext } from './route-harness.ts';

let root: { dir: string; remove: () => Promise<void> };
let ctx: StoriesContext;
let expected: number[];
const TOKENS = 16;
beforeAll(async () => {
  root = await tempDir('quarantine-revokes');
  process.env.MESHNET_HOME = root.dir;
  ctx = await openStories();
  expected = await oneProcessTokens(ctx, PROMPT, TOKENS);
});
afterAll(async () => {
  await ctx.head.dispose();
  await root.remove();
});

it('a peer reported by one session is replaced in every other live session at its next frame; tokens unchanged, its KV released', async () => {
  let p2Frames!: CountingLink;
  const t = inProcessMesh(ctx, 3, (id, peer) => {
    const link = new InProcessLink(peer);
    return id === 'p2' ? (p2Frames = new CountingLink(link)) : link;
  });
  const sessions = [0, 1, 2].map(() => openSession(ctx, t.provider, greedy(TOKENS), undefined, {}, PROMPT));
  let framesAtReport = -1;
  const results = await Promise.all(
    sessions.map((session, i) =>
      collect(session, (index) => {
        // The first session, after its 5th token, reports p2 as a verifier would.
        if (i !== 0 || index !== 5) return;
        const hop = session.telemetry.hops.find((h) => h.peerId === 'p2');
        expect(hop, 'p2 serves a hop of the first session').toBeDefined();
        t.mesh.reportFault('p2', hop!.range, { kind: 'mismatch', reason: 'its answer disagreed with a replay' });
        framesAtReport = p2Frames.frames;
      }),
    ),
  );
  for (const { ids } of results) expect(ids).toEqual(expected);
  expect(framesAtReport).toBeGreaterThan(0);
  // No session sent p2 a frame after the report (without the revocation the other two kept
  // sending it one per token, and the reporter's own session too, since reporting alone does
  // not replace a hop).
  expect(p2Frames.frames).toBe(framesAtReport);
  expect(t.mesh.peers.find((p) => p.id === 'p2')!.quarantine).toMatchObject({ strikes: 1, reason: expect.stringMatching(/^mismatch on layers/) });
  for (const session of sessions) {
    const replaced = session.telemetry.repairs.filter((r) => r.kind === 'replaced');
    expect(replaced).toEqual([expect.objectContaining({ lostPeerId: 'p2', reason: expect.stringMatching(/quarantined/) })]);
  }
  await Promise.all(sessions.map((s) => s.closed));
  for (const id of ['p1', 'p2', 'p3']) expect(t.peers.get(id)!.kvEntries, `${id} keeps no KV`).toBe(0);
});
