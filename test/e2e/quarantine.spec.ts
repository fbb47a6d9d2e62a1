/**
 * The dashboard shows a quarantined peer: a head with two in-process peers, one of which
 * answers `internal` errors; after a completion routed around it, its row says
 * "quarantined" with the reason in the badge's title, and the live update arrives over SSE.
 */
import { rmSync } from 'node:fs';
import { expect, test } from '@playwright/test';
import { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { localShardLoader } from '../../src/node/local-shard-loader.ts';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { FaultyPeer } from '../route/peer-doubles.ts';
import { startStoriesHead, useTempHome } from './mesh-fixture.ts';

let home: string;
let serving: ServingHead | undefined;
const peers: ShardPeer[] = [];

test.beforeAll(async () => {
  home = useTempHome();
  serving = await startStoriesHead();
  for (const id of ['p1', 'p2']) {
    const peer = new ShardPeer({ loader: localShardLoader(serving.head.model, { device: 'cpu', threads: 1 }), memoryBudgetBytes: 1 << 30 });
    peers.push(peer);
    const service = id === 'p1' ? new FaultyPeer(peer, 'internal', 2) : peer;
    serving.head.mesh.addPeer({ id, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link: new InProcessLink(service) });
  }
});

test.afterAll(async () => {
  await serving?.close();
  await Promise.all(peers.map((p) => p.dispose()));
  rmSync(home, { recursive: true, force: true });
});

test('a peer quarantined mid-session turns "quarantined" on the dashboard, with its reason', async ({ page }) => {
  const head = serving!;
  await page.goto(`${head.head.url}dashboard`);
  await expect(page.locator('table.peers tr[data-peer-id="p1"]')).toHaveAttribute('data-status', /joining|ready/);
  const response = await fetch(`${head.head.url}v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: head.modelId, prompt: [1], max_tokens: 8, temperature: 0 }),
  });
  expect(response.status).toBe(200);
  const row = page.locator('table.peers tr[data-peer-id="p1"]');
  await expect(row).toHaveAttribute('data-status', 'quarantined');
  await expect(row.locator('.badge')).toHaveText(/^quarantined · \d+ s$/);
  await expect(row.locator('.badge')).toHaveAttribute('title', /faulty on layers \[0, 3\).*GPU out of memory/);
  await expect(page.locator('table.peers tr[data-peer-id="p2"]')).toHaveAttribute('data-status', 'ready');
});
