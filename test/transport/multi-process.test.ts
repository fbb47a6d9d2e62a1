/**
 * Multi-process runs on loopback: `meshnet generate --local-peers 2` (a head plus two
 * `meshnet peer` processes) gives the one-process golden tokens over relay and over direct
 * links; and a standalone `meshnet peer` with a wrong or missing join token is refused by a
 * head started here, exits non-zero and says why on stderr.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningHead } from '../../src/node/head/head-node.ts';
import { STORIES_DIR, STORIES_GOLDEN } from '../engine/harness.ts';
import { runCli } from '../cli/run-cli.ts';
import { useStories } from '../route/route-harness.ts';
import { startStoriesHead } from './transport-harness.ts';

const stories = useStories('multi-process'); // the head's home; the CLI processes get their own inside it
let env: NodeJS.ProcessEnv;
beforeAll(() => {
  env = { MESHNET_HOME: path.join(stories.home, 'cli-home'), MESHNET_JOIN_TOKEN: undefined };
});

describe('meshnet generate --local-peers 2', () => {
  for (const link of ['relay', 'direct'] as const) {
    it(`--link ${link}: two peer processes give the golden tokens over 2 hops`, { timeout: 180_000 }, async () => {
      const args = ['generate', '--model', STORIES_DIR, '--prompt-ids', '1', '--max-tokens', '32', '--temperature', '0', '--local-peers', '2', '--link', link, '--device', 'cpu', '--json'];
      const result = await runCli(args, env, 170_000);
      expect(result.code, result.stderr).toBe(0);
      const out = JSON.parse(result.stdout.trim().split('\n').at(-1)!);
      expect(out.token_ids).toEqual(STORIES_GOLDEN);
      expect(out.finish_reason).toBe('length');
      expect(out.repairs).toBe(0);
      expect(out.hops).toHaveLength(2);
      expect(out.hops.map((h: { peerId: string }) => h.peerId).sort()).toEqual(['local-1', 'local-2']);
      expect(out.hops.map((h: { range: number[] }) => h.range)).toEqual([
        [0, out.hops[0].range[1]],
        [out.hops[0].range[1], 5],
      ]);
      expect(result.stderr).toMatch(new RegExp(`${link} link`));
      console.log(`per-hop latency, ${link}, separate processes: ${out.hops.map((h: { peerId: string; meanMs: number }) => `${h.peerId} ${h.meanMs.toFixed(3)} ms/frame`).join(', ')}`);
    });
  }
});

describe('meshnet peer against a head with a join token', () => {
  let head: RunningHead;
  beforeAll(async () => {
    head = await startStoriesHead(stories.ctx, 'relay');
  });
  afterAll(async () => {
    await head?.close();
  });

  it('a wrong --join-token: exits non-zero with the refusal on stderr', async () => {
    const result = await runCli(['peer', '--head', head.peerUrl, '--join-token', 'wrong-token', '--device', 'cpu', '--peer-id', 'wrong-token-peer'], env, 60_000);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/refused this peer \(unauthorized\): the join token is wrong/);
    expect(head.mesh.remotePeerCount).toBe(0);
  });

  it('no join token at all: exits non-zero, telling how to pass one', async () => {
    const result = await runCli(['peer', '--head', head.peerUrl, '--device', 'cpu'], env, 60_000);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/needs a join token: start the peer with --join-token/);
    expect(head.mesh.remotePeerCount).toBe(0);
  });
});
