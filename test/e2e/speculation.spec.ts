/**
 * Speculative decoding with a browser tab in the route (real Chromium): greedy output with
 * prompt-lookup drafts equals the golden ids when the tab holds the middle layers (wasm, KV on
 * the CPU: rejected drafts are trimmed in place) and when it holds every layer on WebGPU (KV in
 * GPU buffers, cut by lowering the length the graph reads: no rebuild either).
 */
import { expect } from '@playwright/test';
import OpenAI from 'openai';
import { STORIES_GOLDEN } from '../engine/harness.ts';
import { specFetch, takeSpecViolations } from '../openapi/spec-fetch.ts';
import { joinTab, SOFTWARE_GPU_DEADLINES, startStoriesHead, test, useTempHome, waitForPeers } from './mesh-fixture.ts';

test.beforeAll(() => {
  useTempHome();
});
test.afterEach(() => expect(takeSpecViolations()).toEqual([]));

const goldenText = STORIES_GOLDEN.map((id) => `t${id}`).join(' ');

test('Node peer + wasm tab + Node peer: greedy with speculation gives the golden ids; drafts kept and rejected pass through the tab', async ({ sandwich }) => {
  const serving = await sandwich('wasm');
  const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', fetch: specFetch });
  const reply = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 32, temperature: 0 });
  expect(reply.choices[0].text).toBe(goldenText);
  const session = serving.store.state.finished[0];
  expect(session.hops.map((h) => h.peerId)).toEqual(['local-1', 'local-1b', 'local-2']);
  expect(session.speculation!.accepted).toBeGreaterThan(0);
  expect(session.speculation!.drafted).toBeGreaterThan(session.speculation!.accepted);
  expect(session.repairs).toEqual([]); // KV on the CPU: every rejection was trimmed in place
});

test('a WebGPU tab holding every layer: greedy with speculation gives the golden ids; its GPU-held KV is cut in place after rejections', async ({ page }) => {
  const serving = await startStoriesHead(SOFTWARE_GPU_DEADLINES);
  try {
    await joinTab(page, serving, 'autojoin=1&device=webgpu&peer-id=gpu-tab');
    await waitForPeers(serving, 1);
    await expect(page.locator('#provider')).toHaveText('webgpu');
    const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', fetch: specFetch });
    const reply = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 32, temperature: 0 });
    expect(reply.choices[0].text).toBe(goldenText);
    const session = serving.store.state.finished[0];
    expect(session.speculation!.accepted).toBeGreaterThan(0);
    const rejections = session.speculation!.drafted > session.speculation!.accepted;
    expect(rejections).toBe(true);
    // The replaced KV (GPU buffers) is cut by lowering the length its graph reads: no rebuilds.
    expect(session.repairs).toEqual([]);
  } finally {
    await serving.close();
  }
});
