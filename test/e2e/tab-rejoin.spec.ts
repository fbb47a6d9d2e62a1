/**
 * A browser tab outlives its head connection (#27): a real Chromium tab (wasm) holds every
 * layer of a head that holds none. The head drops the tab's socket: the tab says
 * `reconnecting`, rejoins under the same id with its layers still loaded, the dashboard shows
 * it rejoined, and the greedy answer is the one-process answer again. Then the head itself
 * restarts on its port: the tab rejoins the new head by itself and serves it a golden answer.
 */
import { expect, test, type Page } from '@playwright/test';
import type { ServingHead } from '../../src/node/serve/serve-head.ts';
import { oneProcessGreedy, startStoriesHead, useTempHome } from './mesh-fixture.ts';

const TOKEN = 'tab-rejoin-token';

test.beforeAll(() => {
  useTempHome();
});

async function untilRouted(serving: ServingHead): Promise<void> {
  const by = Date.now() + 30_000;
  while (!serving.head.mesh.routeReady()) {
    if (Date.now() > by) throw new Error('the route through the tab did not warm up within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function greedyText(serving: ServingHead): Promise<string> {
  const response = await fetch(`${serving.head.url}v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: serving.modelId, prompt: [1], max_tokens: 16, temperature: 0 }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { choices: { text: string }[] }).choices[0]!.text;
}

const joinedAs = (page: Page) => page.evaluate(() => (window as unknown as { meshnetPeer?: { peerId: string } }).meshnetPeer?.peerId);

test('a tab rejoins under the same id after its socket drops and after the head restarts, and the dashboard shows the rejoin', async ({ page, context }) => {
  test.setTimeout(60_000);
  const golden = oneProcessGreedy([1], 16).text;
  let serving = await startStoriesHead({ joinToken: TOKEN });
  const port = Number(new URL(serving.head.url).port);
  try {
    await page.goto(`${serving.head.url}peer?autojoin=1&device=wasm&peer-id=tab-1&token=${TOKEN}`);
    await expect(page.getByTestId('state')).toHaveText('connected', { timeout: 30_000 });
    await expect(page.getByTestId('layers')).toHaveText('[0, 5)', { timeout: 30_000 });
    await untilRouted(serving);
    expect(await greedyText(serving)).toBe(golden);
    expect(await joinedAs(page)).toBe('tab-1');

    // The head drops the tab's socket: the tab rejoins as tab-1, its layers kept.
    const states: string[] = [];
    await page.exposeFunction('recordState', (s: string) => states.push(s));
    await page.evaluate(() => {
      const el = document.getElementById('state')!;
      new MutationObserver(() => void (window as unknown as { recordState(s: string): void }).recordState(el.textContent ?? '')).observe(el, { childList: true, characterData: true, subtree: true });
    });
    serving.head.mesh.removePeer('tab-1', 'dropped by the test');
    await expect.poll(() => serving.store.state.peers.find((p) => p.id === 'tab-1')?.rejoins, { timeout: 15_000 }).toBe(1);
    expect(states, 'the tab showed it was reconnecting').toContain('reconnecting');
    await expect(page.getByTestId('state')).toHaveText('connected');
    await expect(page.getByTestId('layers')).toHaveText('[0, 5)');
    await untilRouted(serving);
    expect(await greedyText(serving)).toBe(golden);
    const dashboard = await context.newPage();
    await dashboard.goto(`${serving.head.url}dashboard`);
    await expect(dashboard.locator('tr[data-peer-id="tab-1"] [data-testid=peer-rejoins]')).toHaveText('rejoined', { timeout: 10_000 });
    await expect(dashboard.locator('tr[data-peer-id="tab-1"]')).toHaveAttribute('data-status', 'ready');
    await dashboard.close();

    // The head restarts on its port: the tab finds it again by itself.
    await serving.close();
    await expect(page.getByTestId('state')).toHaveText('reconnecting', { timeout: 10_000 });
    const restartedAt = Date.now();
    serving = await startStoriesHead({ joinToken: TOKEN, port });
    await untilRouted(serving);
    expect(await greedyText(serving)).toBe(golden);
    const rejoinMs = Date.now() - restartedAt;
    expect(serving.head.mesh.peers.map((p) => p.id)).toContain('tab-1');
    await expect(page.getByTestId('state')).toHaveText('connected');
    console.log(`golden through the rejoined tab ${rejoinMs} ms after the head restart began`);
  } finally {
    await serving.close();
  }
});
