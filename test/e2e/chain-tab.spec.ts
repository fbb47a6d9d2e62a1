/**
 * A browser tab in a chained route (protocol 3.2), real Chromium on wasm between real
 * `meshnet peer` processes that listen for direct links. A tab cannot accept connections, so
 * the link into it goes through the head; the link out of it is direct: the tab dials the next
 * Node peer itself (the `hop` handshake from a page). Greedy tokens equal one Node process,
 * with the tab in the middle and at the end, and the dashboard draws which links are direct.
 * The tab closed mid-stream mid-chain is replaced by a Node peer, the tokens unchanged.
 */
import { expect } from '@playwright/test';
import OpenAI from 'openai';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { specFetch, takeSpecViolations } from '../openapi/spec-fetch.ts';
import { oneProcessGreedy, streamClosingTab, test, useTempHome } from './mesh-fixture.ts';

test.beforeAll(() => {
  useTempHome();
});
test.afterEach(() => expect(takeSpecViolations()).toEqual([]));

async function greedyThrough(serving: ServingHead, prompt: number[], maxTokens: number): Promise<string> {
  const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', fetch: specFetch });
  const reply = await client.completions.create({ model: serving.modelId, prompt, max_tokens: maxTokens, temperature: 0 });
  return reply.choices[0].text;
}

test('Node peer + tab + Node peer chained: the tab forwards straight to the next peer, same tokens as one process; the dashboard draws it; the tab closed mid-stream is replaced, same tokens', async ({ page, sandwich }) => {
  const serving = await sandwich('wasm', { routeMode: 'chain' }, { link: 'direct' });
  expect(await greedyThrough(serving, [1, 401, 461], 24)).toBe(oneProcessGreedy([1, 401, 461], 24).text);
  const session = serving.store.state.finished[0];
  expect(session.hops.map((h) => h.peerId)).toEqual(['local-1', 'local-1b', 'local-2']);
  // local-1 → tab through the head (a tab cannot be dialled); tab → local-2 direct (it dialled out).
  expect(session.links).toEqual(['head', 'direct']);
  expect(session.repairs).toEqual([]);
  // The tab's own page is the peer; the dashboard opens beside it.
  const dashboard = await page.context().newPage();
  await dashboard.goto(`${serving.head.url}dashboard`);
  const links = dashboard.locator('svg.route g.chain-link');
  await expect(links).toHaveCount(2);
  await expect(links.nth(0)).toHaveAttribute('data-link', 'head');
  await expect(links.nth(1)).toHaveAttribute('data-link', 'direct');
  await expect(links.nth(1)).toHaveAttribute('data-from', 'local-1b');
  await expect(links.nth(1)).toContainText('direct');
  await expect(links.nth(0)).toContainText('via head');
  await dashboard.close();

  // The tab mid-chain goes away mid-stream: a Node peer takes its range, rebuilt from the head's history.
  const { text, session: after } = await streamClosingTab(serving, page);
  expect(text).toBe(oneProcessGreedy([1], 40).text);
  expect(after.state).toBe('finished');
  expect(after.repairs.some((r) => r.kind === 'replaced' && r.lostPeerId === 'local-1b')).toBe(true);
  expect(after.hops.map((h) => h.peerId)).not.toContain('local-1b');
});

test('Node peer + Node peer + tab chained: the tab at the end answers the head, same tokens as one process', async ({ sandwich }) => {
  const serving = await sandwich('wasm', { routeMode: 'chain' }, { link: 'direct', tabId: 'local-3' });
  expect(await greedyThrough(serving, [1], 24)).toBe(oneProcessGreedy([1], 24).text);
  const session = serving.store.state.finished[0];
  expect(session.hops.map((h) => h.peerId)).toEqual(['local-1', 'local-2', 'local-3']);
  expect(session.links).toEqual(['direct', 'head']);
  expect(session.repairs).toEqual([]);
});
