/** Shared set-up for browser tests: a real head on a loopback port, and reference outputs. */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { test as base, type Page } from '@playwright/test';
import OpenAI from 'openai';
import { spawnLocalPeers } from '../../src/node/peer/local-peers.ts';
import { serveHead, type ServeOptions, type ServingHead } from '../../src/node/serve/serve-head.ts';
import { testHeadOptions } from '../fixtures/test-head.ts';
import { specFetch } from '../openapi/spec-fetch.ts';

export const STORIES_DIR = path.resolve(import.meta.dirname, '../fixtures/models/stories260k');
const BIN = path.resolve(import.meta.dirname, '../../bin/meshnet.js');

export function useTempHome(): string {
  const home = mkdtempSync(path.join(os.tmpdir(), 'meshnet-e2e-'));
  process.env.MESHNET_HOME = home;
  return home;
}

/**
 * Hop deadlines for a head whose route runs through a WebGPU tab on SwiftShader (Chromium's
 * software GPU): onnxruntime-web compiles kernels for each new frame shape there, which took
 * 2–5+ s per shape on a loaded 2-core machine (a first 3- or 6-position speculative verify), so
 * the default ceiling (--hop-timeout 5 s) and floor (1 s) would replace a tab that is working.
 * These tests check tokens and routes, not hang detection (test/hostile/ and test/route/ do).
 */
export const SOFTWARE_GPU_DEADLINES = { hopTimeoutMs: 60_000, hopFloorMs: 10_000 } as const;

/** A head over stories260k that holds no layers (tabs and peers hold them). */
export function startStoriesHead(overrides: Partial<ServeOptions> = {}): Promise<ServingHead> {
  return serveHead(testHeadOptions({ headLayers: 'none', ...overrides }));
}

/** Greedy ids and text of one Node process (`meshnet generate` without speculation, with `extra` flags such as `--weights q4`) for the given prompt ids. */
export function oneProcessGreedy(promptIds: number[], maxTokens: number, extra: string[] = []): { token_ids: number[]; text: string } {
  const args = [BIN, 'generate', '--model', STORIES_DIR, '--prompt-ids', promptIds.join(','), '--max-tokens', String(maxTokens), '--temperature', '0', '--device', 'cpu', '--speculate', 'off', '--json', ...extra];
  const result = spawnSync(process.execPath, args, {
    encoding: 'utf8',
    env: process.env,
  });
  if (result.status !== 0) throw new Error(`meshnet generate failed: ${result.stderr}`);
  return JSON.parse(result.stdout);
}

/** Open the join page and wait until the tab is connected (or refused). */
export async function joinTab(page: Page, serving: ServingHead, query: string): Promise<void> {
  await page.goto(`${serving.head.url}peer?${query}`);
  await page.waitForFunction(() => ['connected', 'refused', 'disconnected'].includes(document.getElementById('state')?.textContent ?? ''));
}

/**
 * Streams a greedy 40-token completion of [1] and closes `page` (its tab) after the fifth chunk:
 * the streamed text and the finished session's view, for the caller to check the repair.
 */
export async function streamClosingTab(serving: ServingHead, page: Page): Promise<{ text: string; session: ServingHead['store']['state']['finished'][number] }> {
  const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', fetch: specFetch });
  const stream = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 40, temperature: 0, stream: true });
  let text = '';
  let chunks = 0;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    if (++chunks === 5) await page.close();
  }
  return { text, session: serving.store.state.finished[0] };
}

/** Wait until `count` non-head peers are in the mesh. */
export async function waitForPeers(serving: ServingHead, count: number, timeoutMs = 60_000): Promise<void> {
  await serving.head.waitForPeers(count, timeoutMs);
}

/**
 * Joined is not yet routed: until a new peer's range answered its warm-up frame (#27), requests
 * take the last ready plan, without it. Wait for the current plan to be warm.
 */
export async function waitForWarmRoute(serving: ServingHead, timeoutMs = 60_000): Promise<void> {
  const warmBy = Date.now() + timeoutMs;
  while (!serving.head.mesh.routeReady()) {
    if (Date.now() > warmBy) throw new Error(`the current route did not warm up within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Where the sandwich's tab sits and how its Node peers link. */
export interface SandwichOptions {
  /** `direct`: the Node peers listen (`--listen 0`), so other peers can dial them (chained routes), and the tab joins with the join token. Default relay. */
  readonly link?: 'relay' | 'direct';
  /** The tab's peer id (peers are ordered by id): default local-1b, between local-1 and local-2; local-3 puts it last. */
  readonly tabId?: string;
}

/**
 * `test` with the `sandwich` fixture: `sandwich(device, head?, options?)` starts a head over
 * stories260k that holds no layers (`head` overrides its options), two Node peers (local-1,
 * local-2, relay unless `options.link`, CPU) and joins this test's page as a tab (local-1b,
 * between them, unless `options.tabId`), and waits until all three are in the mesh and the
 * route through them is warm. With a WebGPU tab the head has SOFTWARE_GPU_DEADLINES. Everything
 * it started is closed after the test.
 */
export const test = base.extend<{ sandwich: (device: 'wasm' | 'webgpu', head?: Partial<ServeOptions>, options?: SandwichOptions) => Promise<ServingHead> }>({
  sandwich: async ({ page }, use) => {
    const started: { serving: ServingHead; peers: ReturnType<typeof spawnLocalPeers> }[] = [];
    await use(async (device, head = {}, options = {}) => {
      const serving = await startStoriesHead(device === 'webgpu' ? { ...SOFTWARE_GPU_DEADLINES, ...head } : head);
      const peers = spawnLocalPeers({ count: 2, headUrl: serving.head.peerUrl, joinToken: serving.head.joinToken, link: options.link ?? 'relay', device: 'cpu', threads: 1 });
      started.push({ serving, peers });
      await waitForPeers(serving, 2);
      // A tab that dials peers proves the join token to them, so it must know it (a tab joined
      // without one on loopback is admitted by the head, but cannot prove anything to a peer).
      const token = options.link === 'direct' && serving.head.joinToken ? `&token=${encodeURIComponent(serving.head.joinToken)}` : '';
      await joinTab(page, serving, `autojoin=1&device=${device}&peer-id=${options.tabId ?? 'local-1b'}${token}`);
      await waitForPeers(serving, 3);
      await waitForWarmRoute(serving);
      return serving;
    });
    for (const { serving, peers } of started) {
      await serving.close();
      await peers.close();
    }
  },
});
