/**
 * The dashboard against a real head with two real `meshnet peer` processes on loopback:
 * the route picture and peers appear, a streaming completion shows up as a live session
 * with its hops and a growing token count, then moves to the finished list with its
 * outcome; a killed peer is marked gone; a head that goes away shows the reconnect banner
 * and the page comes back live when a head listens again. A screenshot taken while a session
 * is live is attached and written to test-results/dashboard-live.png.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { serveHead, type ServeOptions, type ServingHead } from '../../src/node/serve/serve-head.ts';
import { specFetch, takeSpecViolations } from '../openapi/spec-fetch.ts';
import { testHeadOptions } from '../fixtures/test-head.ts';

const MODEL = path.resolve(import.meta.dirname, '../fixtures/models/stories260k');
const SCREENSHOT = path.resolve(import.meta.dirname, '../../test-results/dashboard-live.png');

const options = (extra: Partial<ServeOptions> = {}): ServeOptions => testHeadOptions({ model: MODEL, localPeers: 2, headLayers: 'none', ...extra });

let home: string;
let serving: ServingHead | undefined;

// Every API body these tests receive conforms to the OpenAI spec (test/openapi/spec-fetch.ts).
test.afterEach(() => expect(takeSpecViolations()).toEqual([]));

test.beforeAll(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'meshnet-dashboard-'));
  process.env.MESHNET_HOME = home;
});

test.afterAll(async () => {
  await serving?.close();
  await rm(home, { recursive: true, force: true });
});

async function until(check: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** A streaming completion of `maxTokens` tokens: its response id once the first chunk is in, and its end. */
function streamCompletion(head: ServingHead, maxTokens = 500): { id: Promise<string>; done: Promise<string> } {
  let resolveId!: (id: string) => void;
  const id = new Promise<string>((resolve) => (resolveId = resolve));
  const done = (async () => {
    const response = await specFetch(`${head.head.url}v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: head.modelId, prompt: [1], max_tokens: maxTokens, temperature: 0.8, stream: true }),
    });
    expect(response.status).toBe(200);
    const decoder = new TextDecoder();
    let text = '';
    const reader = response.body!.getReader();
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      text += decoder.decode(read.value, { stream: true });
      const match = /"id":"([^"]+)"/.exec(text);
      if (match) resolveId(match[1]!);
    }
    return text;
  })();
  done.catch(() => {});
  return { id, done };
}

/** Records, in the page, every completion-token count each running session card shows. */
async function watchTokenCounts(page: Page): Promise<void> {
  await page.evaluate(() => {
    const seen: Record<string, { counts: number[]; hops: number }> = {};
    (window as unknown as { seen: typeof seen }).seen = seen;
    const record = () => {
      for (const card of document.querySelectorAll<HTMLElement>('.session-card[data-state="running"]')) {
        const id = card.dataset.sessionId!;
        const count = Number(card.querySelector('[data-testid="completion-tokens"]')!.textContent!.replace(/\D/g, ''));
        const entry = (seen[id] ??= { counts: [], hops: 0 });
        if (entry.counts[entry.counts.length - 1] !== count) entry.counts.push(count);
        entry.hops = card.querySelectorAll('.hop-row').length;
      }
    };
    new MutationObserver(record).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
}

test('shows the route, peers and a live session through to its outcome; a killed peer is marked gone', async ({ page }, testInfo) => {
  serving = await serveHead(options());
  const head = serving;
  await until(() => head.head.mesh.remotePeerCount === 2 && head.store.state.route.hops.length === 2, 'two peers and a two-hop route');

  await page.goto(`${head.head.url}dashboard`);
  await expect(page.getByTestId('connection')).toHaveText('live');
  await expect(page.locator('table.peers tr[data-peer-id="local-1"]')).toHaveAttribute('data-status', 'ready');
  await expect(page.locator('table.peers tr[data-peer-id="local-2"]')).toHaveAttribute('data-status', 'ready');
  // Each peer's weight format and the packed bytes of its layers.
  await expect(page.locator('table.peers tr[data-peer-id="local-1"] [data-testid="peer-weights"]')).toContainText('fp32 · ');
  const hops = page.locator('svg.route g.hop');
  await expect(hops).toHaveCount(2);
  // The split of the five layers is the planner's: the picture shows the head's route.
  for (const [index, hop] of head.store.state.route.hops.entries()) {
    await expect(hops.nth(index)).toContainText(hop.peerId);
    await expect(hops.nth(index)).toContainText(`[${hop.range.start}, ${hop.range.end})`);
  }
  await expect(hops.nth(0)).toContainText('[0, ');
  await expect(hops.nth(1)).toContainText(', 5)');
  await watchTokenCounts(page);

  // stories260k decodes 500 tokens in about a second and a half over two relay hops: take the
  // screenshot as soon as a card is running and keep it only if the card was running both
  // before and after the capture (one more request when the session was too quick).
  let live: { id: string; shot: Buffer } | undefined;
  const ids: string[] = [];
  for (let attempt = 0; attempt < 5 && !live; attempt++) {
    const request = streamCompletion(head);
    const id = await request.id;
    ids.push(id);
    const card = page.locator(`.session-card[data-session-id="${id}"]`);
    const running = () => card.evaluate((element) => element.getAttribute('data-state') === 'running' && element.querySelectorAll('.hop-row').length === 2 && element.querySelector('svg.sparkline polyline') !== null).catch(() => false);
    await expect(card.or(page.locator(`table.finished tr[data-session-id="${id}"]`)).first()).toBeVisible();
    await expect.poll(async () => (await running()) || (await card.count()) === 0, { intervals: [10] }).toBe(true);
    if (await running()) {
      const shot = await page.screenshot();
      if (await running()) live = { id, shot };
    }
    await request.done;
  }
  expect(live, 'a screenshot while a session was live').toBeDefined();
  await mkdir(path.dirname(SCREENSHOT), { recursive: true });
  await writeFile(SCREENSHOT, live!.shot);
  await testInfo.attach('dashboard-live', { body: live!.shot, contentType: 'image/png' });

  // The live card showed both hops and a token count that grew while it ran.
  const seen = await page.evaluate(() => (window as unknown as { seen: Record<string, { counts: number[]; hops: number }> }).seen);
  const watched = seen[live!.id]!;
  expect(watched.hops).toBe(2);
  expect(watched.counts.length).toBeGreaterThanOrEqual(2);
  expect(watched.counts).toEqual([...watched.counts].sort((a, b) => a - b));
  expect(watched.counts[watched.counts.length - 1]!).toBeGreaterThan(watched.counts[0]!);

  // Every request ends in the finished list with its outcome; no card is left live.
  for (const id of ids) {
    const row = page.locator(`table.finished tr[data-session-id="${id}"]`);
    await expect(row).toHaveAttribute('data-state', 'finished');
    await expect(row.getByTestId('outcome')).toHaveText('finished');
    await expect(row.getByTestId('completion-tokens')).not.toHaveText('0');
    // Speculative decoding per session: the share of drafts kept (prompt lookup) and tokens per round trip.
    await expect(row.getByTestId('acceptance')).toHaveText(/^(\d+%|—) ngram$/);
    await expect(row.getByTestId('tokens-per-round-trip')).toHaveText(/^\d+\.\d$/);
  }
  await expect(page.locator('.session-card')).toHaveCount(0);
  await expect(page.getByTestId('totals')).toContainText(String(ids.length));

  // A peer process dies: its row is marked gone and the route no longer goes through it.
  head.peers!.processes[1]!.kill('SIGKILL');
  await expect(page.locator('table.peers tr[data-peer-id="local-2"]')).toHaveAttribute('data-status', 'gone');
  await expect(page.locator('table.peers tr[data-peer-id="local-2"] .badge')).toHaveText('gone');
  await expect(page.locator('svg.route g.hop[data-peer-id="local-2"]')).toHaveCount(0);
  await expect(page.locator('table.peers tr[data-peer-id="local-1"]')).toHaveAttribute('data-status', 'ready');
  await testInfo.attach('dashboard-after', { body: await page.screenshot({ path: testInfo.outputPath('dashboard-after.png') }), contentType: 'image/png' });
});

test('says the head is unreachable while it is gone and comes back live without a reload', async ({ page }) => {
  await serving?.close();
  serving = await serveHead(options({ localPeers: 0, headLayers: 'auto' }));
  const port = Number(new URL(serving.head.url).port);
  await page.goto(`${serving.head.url}dashboard`);
  await expect(page.getByTestId('connection')).toHaveText('live');
  const banner = page.locator('#banner');
  await expect(banner).toBeHidden();
  await page.evaluate(() => ((window as unknown as { marker: boolean }).marker = true));

  await serving.close();
  serving = undefined;
  await expect(banner).toBeVisible();
  await expect(banner).toContainText('Head unreachable — reconnecting');
  await expect(page.getByTestId('connection')).toHaveText('reconnecting');

  serving = await serveHead(options({ localPeers: 0, headLayers: 'auto', port }));
  await expect(page.getByTestId('connection')).toHaveText('live');
  await expect(banner).toBeHidden();
  await expect(page.locator('svg.route g.hop')).toHaveCount(1); // the new head's own route
  expect(await page.evaluate(() => (window as unknown as { marker?: boolean }).marker)).toBe(true); // same page
});

test('with --api-key the dashboard needs the key once (?key= sets the cookie its requests carry)', async ({ page }) => {
  const guarded = await serveHead(options({ localPeers: 0, headLayers: 'auto', apiKey: 'dash-key' }));
  try {
    const refused = await page.goto(`${guarded.head.url}dashboard`);
    expect(refused?.status()).toBe(401);
    const allowed = await page.goto(`${guarded.head.url}dashboard?key=dash-key`);
    expect(allowed?.status()).toBe(200);
    // The page's own requests (app.js, /api/events) carry the cookie: the head peer shows up live.
    await expect(page.locator('table.peers tr[data-peer-id="head"]')).toBeVisible();
    const reload = await page.goto(`${guarded.head.url}dashboard`);
    expect(reload?.status()).toBe(200);
  } finally {
    await guarded.close();
  }
});
