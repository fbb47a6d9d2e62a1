/**
 * The join page a volunteer sees (`/peer`), in real Chromium against a real head: the
 * dashboard's look, a progress bar while the shard downloads (the network throttled through
 * CDP so the download is seen mid-way: bytes and time left) and loads, then what the tab does
 * once joined — layers, tokens served, a tokens/s sparkline, the GPU adapter. Screenshots of
 * both moments are written to test-results/ (look at them).
 */
import { expect, test } from '@playwright/test';
import OpenAI from 'openai';
import { startStoriesHead, useTempHome } from './mesh-fixture.ts';

test.beforeAll(() => {
  useTempHome();
});

test('the join page shows the shard download, then layers, tokens served, tokens/s and the adapter', async ({ page }, info) => {
  const serving = await startStoriesHead();
  try {
    await page.goto(`${serving.head.url}peer`);
    // The dashboard's stylesheet is applied: its dark background and panel colours.
    expect(await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor)).toBe('rgb(15, 20, 25)');
    await expect(page.getByTestId('state')).toHaveText('not joined');

    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: 160 * 1024, uploadThroughput: -1 });
    await page.locator('#join').click();
    const bar = page.getByRole('progressbar', { name: 'shard download' });
    await expect.poll(async () => Number(await bar.getAttribute('aria-valuenow')), { timeout: 60_000, intervals: [50] }).toBeGreaterThan(15);
    const midway = Number(await bar.getAttribute('aria-valuenow'));
    expect(midway).toBeLessThan(100);
    await expect(page.getByTestId('download-phase')).toHaveText('downloading the shard');
    await expect(page.getByTestId('download-bytes')).toHaveText(/^\d+\.\d\d MB \/ 0\.\d\d MB$/);
    await expect(page.getByTestId('download-left')).toHaveText(/^(\d+ s|<1 s) left$/);
    await page.screenshot({ path: info.outputPath('join-page-downloading.png') });
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });

    await expect(page.getByTestId('state')).toHaveText('connected', { timeout: 60_000 });
    await expect(page.getByTestId('layers')).toHaveText('[0, 5)', { timeout: 60_000 });
    await expect(page.getByTestId('download-phase')).toHaveText('shard loaded');
    await expect(bar).toHaveAttribute('aria-valuenow', '100');
    await expect(page.getByTestId('download-left')).toHaveText(/^in (\d+ s|<1 s)$/);

    // Work for the tab: answers for a few seconds, so the sparkline gets points. Short answers: the
    // tab's first one pays its shader compile (~6 s on SwiftShader), then each token ~0.1 s.
    const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused' });
    const until = Date.now() + 3500;
    let served = 0;
    while (Date.now() < until) {
      const answer = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 8, temperature: 0 });
      served += answer.usage?.total_tokens ?? 0;
    }
    expect(served).toBeGreaterThan(0);
    await expect.poll(async () => Number(await page.getByTestId('tokens').textContent())).toBeGreaterThan(8);
    await expect(page.locator('[data-testid=sparkline] svg.sparkline polyline.spark-line')).toHaveCount(1, { timeout: 10_000 });
    await expect(page.locator('[data-testid=sparkline] .spark-max')).toHaveText(/^max \d+(\.\d)? tok\/s$/);
    await expect(page.getByTestId('provider')).toHaveText(/^(webgpu|wasm)$/);
    const adapter = await page.getByTestId('adapter').textContent();
    expect(adapter === 'no WebGPU adapter' || /\S+ \S*/.test(adapter ?? '')).toBe(true);
    expect(adapter).not.toBe('—');
    await page.screenshot({ path: info.outputPath('join-page-serving.png'), fullPage: true });
  } finally {
    await serving.close();
  }
});
