/**
 * Gemma over the mesh in real Chromium: a Gemma 2 checkpoint (attention and final softcaps,
 * window 3) served by a WebGPU tab alone, 110 tokens, its windowed layers' GPU-held KV trimmed
 * on the device (their bytes asserted from the tab's stats mid-stream), and a Gemma 3 checkpoint (window 3, local and global
 * layers) split over a Node peer and a wasm tab. Each greedy completion through
 * the OpenAI API runs past the window and equals the pure-TypeScript reference's tokens.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect, test } from '@playwright/test';
import OpenAI from 'openai';
import { openCheckpoint } from '../../src/core/model/checkpoint.ts';
import { replaceWindowPositions } from '../../src/core/runtime/kv-state.ts';
import { loadTokenizer } from '../../src/node/tokenizer-files.ts';
import { spawnLocalPeers } from '../../src/node/peer/local-peers.ts';
import { serveHead, type ServingHead } from '../../src/node/serve/serve-head.ts';
import { createFileByteSource } from '../../src/node/file-byte-source.ts';
import { buildGemmaCheckpointFiles, type GemmaCheckpointOptions } from '../fixtures/gemma-checkpoints.ts';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers } from '../reference/forward.ts';
import { joinTab, SOFTWARE_GPU_DEADLINES, useTempHome, waitForPeers } from './mesh-fixture.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'meshnet-gemma-e2e-'));
test.beforeAll(() => {
  useTempHome();
});

const PROMPT = [1, 17, 42, 99, 5];

/** Writes the checkpoint; returns its folder and the reference's greedy ids after PROMPT (stopping at EOS 2). */
async function prepare(name: string, options: GemmaCheckpointOptions, maxTokens: number): Promise<{ dir: string; ids: number[] }> {
  const dir = path.join(root, name);
  mkdirSync(dir, { recursive: true });
  for (const [file, content] of buildGemmaCheckpointFiles(options)) writeFileSync(path.join(dir, file), content);
  const checkpoint = await openCheckpoint(createFileByteSource(dir));
  const tensors = new Map<string, Float32Array>();
  for (const tensor of checkpoint.tensors.keys()) tensors.set(tensor, await checkpoint.readTensor(tensor));
  const weights = { get: (n: string) => tensors.get(n) ?? (() => { throw new Error(`no tensor ${n}`); })() };
  const { config } = checkpoint;
  const all = { start: 0, end: config.numLayers };
  const kv = new ReferenceKvCache();
  const next = (ids: number[]) => {
    const logits = referenceHead(config, weights, referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv).at(-1)!);
    return logits.indexOf(Math.max(...logits));
  };
  const ids: number[] = [];
  let id = next(PROMPT);
  while (ids.length < maxTokens && id !== 2) {
    ids.push(id);
    id = next([id]);
  }
  if (ids.length < 4) throw new Error(`the reference stopped after ${ids.length} tokens: pick another seed`);
  return { dir, ids };
}

function head(dir: string): Promise<ServingHead> {
  return serveHead({ model: dir, port: 0, host: '127.0.0.1', localPeers: 0, link: 'relay', headLayers: 'none', maxSessions: 4, device: 'cpu', dtype: 'fp32', threads: 1, ...SOFTWARE_GPU_DEADLINES }); // SwiftShader under load: a first step can take seconds
}

// One case per runtime keeps the CI time down: softcap + window on WebGPU, Gemma 3's local/global layers on wasm + Node.
const WEBGPU_CASES: Record<string, GemmaCheckpointOptions> = {
  'gemma2 (softcaps)': { version: 2, dtype: 'F32', tied: true, seed: 123, slidingWindow: 3, attnLogitSoftcapping: 2, finalLogitSoftcapping: 5 },
};

/** KV bytes per position per layer of the WebGPU case (K and V, 2 KV heads × head 32, fp32). */
const KV_BYTES_PER_POSITION = 2 * 2 * 32 * 4;
const WEBGPU_TOKENS = 110;

for (const [name, options] of Object.entries(WEBGPU_CASES)) test(`${name} in a tab on webgpu: greedy past the window equals the reference; the windowed layers' GPU KV stays bounded`, async ({ page }) => {
  const { dir, ids } = await prepare(`${name.replace(/\W+/g, '-')}-webgpu`, options, WEBGPU_TOKENS);
  expect(ids.length).toBe(WEBGPU_TOKENS);
  const serving = await head(dir);
  try {
    await joinTab(page, serving, 'autojoin=1&device=webgpu');
    await expect(page.locator('#state')).toHaveText('connected');
    const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused' });
    const stream = await client.completions.create({ model: serving.modelId, prompt: PROMPT, max_tokens: WEBGPU_TOKENS, temperature: 0, stream: true });
    let text = '';
    let chunks = 0;
    let kvBytes = -1;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? '';
      // Mid-stream, the tab's live KV: layers 1 and 3 (global) hold every position, 0 and 2
      // (window 3) at most replaceWindowPositions(3) = 66 — without the trim they would hold all.
      if (++chunks === WEBGPU_TOKENS - 10) {
        const tab = serving.head.mesh.peers.find((p) => p.ranges.length > 0); // the tab (the head holds no layers)
        if (!tab) throw new Error('no peer holds layers');
        const stats = await tab.link.control({ kind: 'stats', kvEntries: 0, kvBytes: 0, kvBudgetBytes: 0, tokensServed: 0, framesServed: 0 }, AbortSignal.timeout(10_000));
        if (stats.kind === 'stats') kvBytes = stats.kvBytes;
      }
    }
    await expect(page.locator('#provider')).toHaveText('webgpu');
    const tokenizer = await loadTokenizer(dir);
    expect(text).toBe(tokenizer.decode(ids));
    // Positions held when asked: at least the chunks seen so far (and the prompt), at most the whole sequence.
    const least = PROMPT.length + WEBGPU_TOKENS - 11;
    const most = PROMPT.length + WEBGPU_TOKENS;
    expect(kvBytes).toBeGreaterThanOrEqual(2 * KV_BYTES_PER_POSITION * (least + 3)); // global layers, and the windowed ones' window
    expect(kvBytes).toBeLessThanOrEqual(2 * KV_BYTES_PER_POSITION * (most + replaceWindowPositions(3)));
    expect(kvBytes).toBeLessThan(4 * KV_BYTES_PER_POSITION * least); // every layer holding every position
  } finally {
    await serving.close();
  }
});

test('gemma3 (local and global layers) over a Node peer and a wasm tab: greedy past the window equals the reference', async ({ page }) => {
  const { dir, ids } = await prepare('gemma3-split', { version: 3, dtype: 'F32', tied: true, seed: 121, slidingWindow: 3, slidingWindowPattern: 2 }, 12);
  const serving = await head(dir);
  const peers = spawnLocalPeers({ count: 1, headUrl: serving.head.peerUrl, joinToken: serving.head.joinToken, link: 'relay', device: 'cpu', threads: 1 });
  try {
    await waitForPeers(serving, 1);
    await joinTab(page, serving, 'autojoin=1&device=wasm&peer-id=local-2');
    await waitForPeers(serving, 2);
    const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused' });
    const reply = await client.completions.create({ model: serving.modelId, prompt: PROMPT, max_tokens: 12, temperature: 0 });
    const tokenizer = await loadTokenizer(dir);
    expect(reply.choices[0].text).toBe(tokenizer.decode(ids));
    expect(serving.store.state.finished[0].hops.map((h) => h.peerId)).toEqual(['local-1', 'local-2']);
  } finally {
    await serving.close();
    await peers.close();
  }
});
