/**
 * A browser tab joins the mesh as a shard peer (real Chromium, onnxruntime-web on WebGPU over
 * SwiftShader, or wasm), alone or between Node peers; closing it mid-stream is a peer loss the
 * stream survives; a wrong join token is refused and the page says why.
 */
import { expect } from '@playwright/test';
import OpenAI from 'openai';
import { loadTokenizer } from '../../src/node/tokenizer-files.ts';
import { spawnLocalPeers } from '../../src/node/peer/local-peers.ts';
import { specFetch, takeSpecViolations } from '../openapi/spec-fetch.ts';
import { joinTab, oneProcessGreedy, SOFTWARE_GPU_DEADLINES, startStoriesHead, STORIES_DIR, streamClosingTab, test, useTempHome, waitForPeers, waitForWarmRoute } from './mesh-fixture.ts';

test.beforeAll(() => {
  useTempHome();
});

// Every API body these tests receive conforms to the OpenAI spec (test/openapi/spec-fetch.ts).
test.afterEach(() => expect(takeSpecViolations()).toEqual([]));

const MESSAGES = [{ role: 'user' as const, content: 't461 t401' }];

async function chatPromptIds(): Promise<number[]> {
  const tokenizer = await loadTokenizer(STORIES_DIR);
  return tokenizer.encode(tokenizer.chatTemplate.render(MESSAGES, { addGenerationPrompt: true }), { addSpecialTokens: false });
}

// SwiftShader runs a WebGPU decode step in ~0.5 s: the WebGPU tab answers half as many tokens.
for (const [device, tokens] of [['webgpu', 12], ['wasm', 24]] as const) {
  test(`a tab on ${device} serves all layers; chat through the OpenAI API equals one Node process`, async ({ page }) => {
    const serving = await startStoriesHead(device === 'webgpu' ? SOFTWARE_GPU_DEADLINES : {});
    try {
      await joinTab(page, serving, `autojoin=1&device=${device}`);
      await expect(page.locator('#state')).toHaveText('connected');
      const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', fetch: specFetch });
      const reply = await client.chat.completions.create({ model: serving.modelId, messages: MESSAGES, max_tokens: tokens, temperature: 0 });
      const expected = oneProcessGreedy(await chatPromptIds(), tokens);
      expect(reply.choices[0].message.content).toBe(expected.text);
      await expect(page.locator('#provider')).toHaveText(device);
      await expect(page.locator('#layers')).toHaveText('[0, 5)');
      const hops = serving.store.state.finished[0].hops;
      expect(hops.map((h) => h.peerId)).toHaveLength(1);
      console.log(`per-hop latency through a browser peer on ${device}: ${hops[0].meanMs.toFixed(1)} ms/frame mean, ${hops[0].lastMs} ms last (decode)`);

      // Two streams at once through the one tab: its executor runs one onnxruntime-web call at a time.
      const prompts = [[1], [1, 401, 461, 378]];
      const streams = await Promise.all(prompts.map((prompt) => client.completions.create({ model: serving.modelId, prompt, max_tokens: tokens / 2, temperature: 0, stream: true })));
      const texts = await Promise.all(
        streams.map(async (stream) => {
          let text = '';
          for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
          return text;
        }),
      );
      expect(texts).toEqual(prompts.map((prompt) => oneProcessGreedy(prompt, tokens / 2).text));
      const both = serving.store.state.finished.slice(0, 2);
      expect(both.map((s) => s.state)).toEqual(['finished', 'finished']);
      // They overlapped: each started before the other finished (a finished view's last rate point is its end).
      expect(Math.max(...both.map((s) => s.startedAt))).toBeLessThan(Math.min(...both.map((s) => s.rate.at(-1)!.t)));
    } finally {
      await serving.close();
    }
  });
}

test('a route of Node peer + browser tab + Node peer gives the one-process tokens', async ({ sandwich }) => {
  // Peers are ordered by id: local-1, local-1b (this tab), local-2.
  const serving = await sandwich('wasm');
  const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', fetch: specFetch });
  const reply = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 32, temperature: 0 });
  expect(reply.choices[0].text).toBe(oneProcessGreedy([1], 32).text);
  const hops = serving.store.state.finished[0].hops.map((h) => h.peerId);
  expect(hops).toEqual(['local-1', 'local-1b', 'local-2']);
});

// Compact weights in the browser: MatMulNBits on onnxruntime-web. Accuracy level 0, so every
// runtime on the route computes over the same dequantized weights (CPU's level 4 would
// quantize activations where the tab's WebGPU and wasm do not).
const Q4_EXACT = { format: 'q4', blockSize: 32, accuracyLevel: 0 } as const;

test('q4: a route of Node peer + browser tab on WebGPU + Node peer gives the one-process q4 tokens', async ({ page, sandwich }) => {
  const serving = await sandwich('webgpu', { weights: Q4_EXACT });
  const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', fetch: specFetch });
  const reply = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 12, temperature: 0 });
  expect(reply.choices[0].text).toBe(oneProcessGreedy([1], 12, ['--weights', 'q4', '--accuracy-level', '0']).text);
  expect(serving.store.state.finished[0].hops.map((h) => h.peerId)).toEqual(['local-1', 'local-1b', 'local-2']);
  await expect(page.locator('#provider')).toHaveText('webgpu');
  const tab = serving.head.mesh.peers.find((p) => p.id === 'local-1b')!;
  expect(tab.weights).toEqual(Q4_EXACT);
  expect(serving.store.state.peers.find((p) => p.id === 'local-1b')?.weights).toBe('q4-b32-acc0');
});

test('q8: a tab on wasm serves every layer and gives the one-process q8 tokens', async ({ page }) => {
  const serving = await startStoriesHead({ weights: { format: 'q8', accuracyLevel: 0 } });
  try {
    await joinTab(page, serving, 'autojoin=1&device=wasm');
    await expect(page.locator('#state')).toHaveText('connected');
    const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused', fetch: specFetch });
    const reply = await client.completions.create({ model: serving.modelId, prompt: [1], max_tokens: 24, temperature: 0 });
    expect(reply.choices[0].text).toBe(oneProcessGreedy([1], 24, ['--weights', 'q8', '--accuracy-level', '0']).text);
    await expect(page.locator('#layers')).toHaveText('[0, 5)');
  } finally {
    await serving.close();
  }
});

test('closing the tab mid-stream: the stream completes with the same tokens, served by a replacement', async ({ page }) => {
  const serving = await startStoriesHead();
  const peers = spawnLocalPeers({ count: 1, headUrl: serving.head.peerUrl, joinToken: serving.head.joinToken, link: 'relay', device: 'cpu', threads: 1 });
  try {
    await waitForPeers(serving, 1);
    await joinTab(page, serving, 'autojoin=1&device=webgpu&peer-id=a-tab');
    await waitForPeers(serving, 2);
    await waitForWarmRoute(serving); // the plan through the tab, so closing it mid-stream needs a replacement
    const { text, session } = await streamClosingTab(serving, page);
    expect(text).toBe(oneProcessGreedy([1], 40).text);
    expect(session.state).toBe('finished');
    expect(session.repairs.some((r) => r.kind === 'replaced' && r.lostPeerId === 'a-tab')).toBe(true);
    expect(session.hops.every((h) => h.peerId === 'local-1')).toBe(true);
  } finally {
    await serving.close();
    await peers.close();
  }
});

test('a tab with a wrong join token is refused and the page says why', async ({ page }) => {
  const serving = await startStoriesHead({ joinToken: 'the-right-token' });
  try {
    await joinTab(page, serving, 'autojoin=1&device=wasm&token=not-the-token');
    await expect(page.locator('#state')).toHaveText('refused');
    await expect(page.locator('#error')).toContainText('join token is wrong');
    expect(serving.head.mesh.remotePeerCount).toBe(0);
  } finally {
    await serving.close();
  }
});
