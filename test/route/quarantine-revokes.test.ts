/**
 * A quarantine reaches every session the peer serves, not only the one that caught it: when
 * one session reports a peer (here as `--verify` would, a mismatch), the other live sessions
 * stop sending it frames, replace that hop and rebuild it from history with their tokens
 * unchanged, and their `release` still reaches the peer, so it keeps no KV. Real ShardPeers
 * behind in-process links; the report is made mid-stream through the mesh's own interface.
 */
import { expect, it } from 'vitest';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { CountingLink } from './peer-doubles.ts';
import { collect, greedy, inProcessMesh, openSession, PROMPT, useStories } from './route-harness.ts';

const TOKENS = 16;
const stories = useStories('quarantine-revokes', TOKENS);

it('a peer reported by one session is replaced in every other live session at its next frame; tokens unchanged, its KV released', async () => {
  let p2Frames!: CountingLink;
  const t = inProcessMesh(stories.ctx, 3, (id, peer) => {
    const link = new InProcessLink(peer);
    return id === 'p2' ? (p2Frames = new CountingLink(link)) : link;
  });
  const sessions = [0, 1, 2].map(() => openSession(stories.ctx, t.provider, greedy(TOKENS), undefined, {}, PROMPT));
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
  for (const { ids } of results) expect(ids).toEqual(stories.expected);
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
