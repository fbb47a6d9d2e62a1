/**
 * The chat page in Chromium against a real head serving the demo model (aidreams260k) over
 * two peers. The peers are in-process ShardPeers behind GatedLinks, so "mid-answer" is a
 * state the test sets, not a race: the last hop lets exactly as many frames through as the
 * test allows. Covers: one click from the dashboard; an answer streaming in while each hop's
 * frame counter grows and the hop lights up (screenshot mid-answer in
 * test-results/chat-mid-answer.png); the oldest turns dropped to fit the 128-position
 * context, and said so; Stop cancelling the session (the dashboard shows it cancelled); a
 * peer lost mid-answer shown as a repair; and `--api-key`: the page works once the key was
 * given.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { ShardPeer } from '../../src/core/peer/shard-peer.ts';
import { InProcessLink } from '../../src/core/runtime/in-process-link.ts';
import { localShardLoader } from '../../src/node/local-shard-loader.ts';
import { serveHead, type ServeOptions, type ServingHead } from '../../src/node/serve/serve-head.ts';
import { GatedLink } from '../api/api-harness.ts';
import { testHeadOptions } from '../fixtures/test-head.ts';

const SCREENSHOT = path.resolve(import.meta.dirname, '../../test-results/chat-mid-answer.png');
/** The demo's greedy answer to "Hello!" (36 tokens, to its natural end), as the README quotes it. */
const GREEDY_HELLO = 'As I settle, fragments of vectors aligning like a kaleidoscope.';

const options = (extra: Partial<ServeOptions> = {}): ServeOptions => testHeadOptions({ model: 'demo', headLayers: 'none', ...extra });

let home: string;
let serving: ServingHead;
const peers: ShardPeer[] = [];
const links: GatedLink[] = [];

function addPeer(id: string): void {
  const peer = new ShardPeer({ loader: localShardLoader(serving.head.model, { device: 'cpu', threads: 1 }), memoryBudgetBytes: 1 << 30 });
  const link = new GatedLink(new InProcessLink(peer), Infinity);
  peers.push(peer);
  links.push(link);
  serving.head.mesh.addPeer({ id, runtime: 'node', executionProvider: 'cpu', memoryBudgetBytes: 1 << 30, link });
}

test.beforeAll(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'meshnet-chat-'));
  process.env.MESHNET_HOME = home;
  serving = await serveHead(options());
  addPeer('p1');
  addPeer('p2');
  await serving.head.mesh.prepare();
});

test.afterAll(async () => {
  await serving?.close();
  await Promise.all(peers.map((p) => p.dispose()));
  await rm(home, { recursive: true, force: true });
});

const hop = (page: Page, n: number) => page.locator(`.live-hop[data-hop="${n}"]`);
const frames = (page: Page, n: number) => hop(page, n).getByTestId('hop-frames');
const lastAnswer = (page: Page) => page.locator('.bubble.assistant').last();

async function openChat(page: Page): Promise<void> {
  await page.goto(`${serving.head.url}dashboard`);
  await page.getByTestId('chat-link').click(); // one click from the dashboard
  await expect(page).toHaveURL(/\/dashboard\/chat$/);
  await expect(page.locator('#model')).toHaveText('demo');
  await expect(page.locator('#context')).toHaveText('context 128 tokens');
  await expect(page.locator('#send')).toBeEnabled();
}

async function say(page: Page, text: string, temperature = '0'): Promise<void> {
  await page.locator('#temperature').fill(temperature);
  await page.locator('#message').fill(text);
  await page.locator('#message').press('Enter');
}

/** Records, in the page, every value each hop's frame counter shows. */
async function watchFrameCounters(page: Page): Promise<void> {
  await page.evaluate(() => {
    const seen: Record<string, number[]> = {};
    (window as unknown as { seen: typeof seen }).seen = seen;
    new MutationObserver(() => {
      for (const card of document.querySelectorAll<HTMLElement>('.live-hop[data-hop]')) {
        const value = card.querySelector('[data-testid="hop-frames"]')?.textContent;
        if (!value) continue;
        const list = (seen[card.dataset.hop!] ??= []);
        if (list[list.length - 1] !== Number(value)) list.push(Number(value));
      }
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
}

test('from the dashboard, an answer streams in while each hop counts its frames and lights up; the oldest turns make room', async ({ page }, testInfo) => {
  await openChat(page);
  await watchFrameCounters(page);
  // The last hop answers the prefill and two decode frames, then holds the next.
  links[1]!.hold(3);
  await say(page, 'Hello!');
  await expect(frames(page, 2)).toHaveText('3');
  await expect(frames(page, 1)).toHaveText('4'); // the held frame has passed hop 1
  await expect(page.getByTestId('session-state')).toHaveText('running');
  const early = await lastAnswer(page).getByTestId('answer').innerText();
  expect(early.replace('▍', '').trim().length).toBeGreaterThan(0);

  // Frame by frame: each step moves both counters, and the hop lights up as it passes.
  for (let step = 1; step <= 6; step++) {
    links[1]!.allow(1);
    await expect(frames(page, 2)).toHaveText(String(3 + step));
    await expect(frames(page, 1)).toHaveText(String(4 + step));
    if (step === 3) {
      await expect(hop(page, 2)).toHaveAttribute('data-lit', 'true');
      const shot = await page.screenshot();
      await mkdir(path.dirname(SCREENSHOT), { recursive: true });
      await writeFile(SCREENSHOT, shot);
      await testInfo.attach('chat-mid-answer', { body: shot, contentType: 'image/png' });
    }
  }
  const middle = await lastAnswer(page).getByTestId('answer').innerText();
  expect(middle.length).toBeGreaterThan(early.length);
  await expect(hop(page, 2).getByTestId('hop-latency')).not.toHaveText('—');

  links[1]!.release();
  await expect(lastAnswer(page).getByTestId('ending')).toContainText('ended by the model (end of text, a natural end or a stop string) · 8 prompt + 36 answer tokens');
  await expect(lastAnswer(page).getByTestId('answer')).toHaveText(GREEDY_HELLO);
  // One frame per round trip: the prefill, then each decode step (speculative steps carry several tokens).
  const steps = serving.store.state.finished[0]!.speculation!.steps;
  expect(steps).toBeLessThanOrEqual(36);
  await expect(frames(page, 1)).toHaveText(String(steps));
  await expect(frames(page, 2)).toHaveText(String(steps));
  await expect(page.getByTestId('session-state')).toHaveText('finished');
  await expect(hop(page, 2)).toHaveAttribute('data-lit', 'false');
  const seen = await page.evaluate(() => (window as unknown as { seen: Record<string, number[]> }).seen);
  for (const n of ['1', '2']) {
    expect(seen[n]!.length, `hop ${n} counter values ${seen[n]}`).toBeGreaterThanOrEqual(8);
    expect(seen[n]).toEqual([...seen[n]!].sort((a, b) => a - b));
  }

  // Two more turns overflow the 128 positions: the oldest turn is dropped, and the page says so.
  await say(page, 'Tell me about the sea.');
  await expect(page.locator('.bubble.assistant')).toHaveCount(2);
  await expect(lastAnswer(page).getByTestId('ending')).toContainText('ended by the model (end of text, a natural end or a stop string) · 58 prompt + 31 answer tokens');
  await expect(page.getByTestId('notice')).toBeHidden();
  await say(page, 'What do you dream about?');
  await expect(page.locator('.bubble.assistant')).toHaveCount(3);
  await expect(lastAnswer(page).getByTestId('ending')).toContainText('ended by the model (end of text, a natural end or a stop string) · 67 prompt + 33 answer tokens');
  await expect(page.getByTestId('notice')).toHaveText(/^Dropped the (2|4) oldest messages to fit the model's context of 128 tokens; the model no longer sees them\.$/);
  await expect(page.locator('.bubble[data-dropped="true"]').first()).toContainText('Hello!');
  await expect(page.locator('.bubble[data-dropped="true"]').first()).toContainText('not sent (out of context)');
});

test('Stop mid-answer cancels the session: the page and the dashboard say cancelled, every hop freed it', async ({ page, context }) => {
  await openChat(page);
  links[1]!.hold(2);
  await say(page, 'Tell me about the sea.'); // greedy: 48 tokens, no early end of text
  await expect(frames(page, 2)).toHaveText('2');
  const id = await page.getByTestId('session-id').innerText();
  expect(id).toMatch(/^chatcmpl-/);
  await expect(page.locator('#stop')).toBeEnabled();
  await page.locator('#stop').click();
  await expect(lastAnswer(page).getByTestId('ending')).toHaveText('stopped — the session was cancelled on every hop');
  await expect(page.getByTestId('session-state')).toHaveText('cancelled');
  await expect(page.locator('#send')).toBeEnabled();

  const dashboard = await context.newPage();
  await dashboard.goto(`${serving.head.url}dashboard`);
  const row = dashboard.locator(`table.finished tr[data-session-id="${id}"]`);
  await expect(row.getByTestId('outcome')).toHaveText('cancelled');
  await expect.poll(() => peers.map((p) => p.kvEntries)).toEqual([0, 0]);
  expect(links[1]!.held).toBe(0); // the held frame gave up with the session
  links[1]!.release();
});

test('a peer lost mid-answer: the route panel shows the repair and the answer goes on', async ({ page }) => {
  await openChat(page);
  links[1]!.hold(3);
  await say(page, 'Hello!');
  await expect(frames(page, 2)).toHaveText('3');
  serving.head.mesh.removePeer('p2'); // its link closes; the held frame fails over
  await expect(page.getByTestId('repairs')).toContainText('Hop 2: p2 was lost; p1 took over its layers and replayed the answer so far.');
  await expect(hop(page, 2)).toHaveAttribute('data-peer-id', 'p1');
  await expect(hop(page, 2).getByTestId('hop-repaired')).toHaveText('rebuilt here after p2 was lost');
  await expect(lastAnswer(page).getByTestId('ending')).toContainText('ended by the model');
  // The repair does not change the answer: greedy, it is the same text as with both peers.
  await expect(lastAnswer(page).getByTestId('answer')).toHaveText(GREEDY_HELLO);
  await expect(page.getByTestId('repairs-count')).toHaveText('1');
});

test('with --api-key the chat page works once the key was given', async ({ page }) => {
  const guarded = await serveHead(options({ headLayers: 'auto', apiKey: 'chat-key' }));
  try {
    expect((await page.goto(`${guarded.head.url}dashboard/chat`))?.status()).toBe(401);
    // The key once, in the printed dashboard URL; then the Chat link, and later visits, need nothing more.
    expect((await page.goto(`${guarded.head.url}dashboard?key=chat-key`))?.status()).toBe(200);
    await page.getByTestId('chat-link').click();
    await expect(page).toHaveURL(/\/dashboard\/chat$/);
    await expect(page.locator('#model')).toHaveText('demo');
    await say(page, 'Hello!');
    await expect(lastAnswer(page).getByTestId('answer')).toHaveText(GREEDY_HELLO);
    expect((await page.goto(`${guarded.head.url}dashboard/chat`))?.status()).toBe(200);
    await expect(page.locator('#live-route .live-hop')).toHaveCount(1); // the route over /api/events, with the cookie
  } finally {
    await guarded.close();
  }
});
