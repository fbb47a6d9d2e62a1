/**
 * Mixture-of-experts models over the mesh: a Qwen3-MoE checkpoint served by a browser tab
 * alone (onnxruntime-web on WebGPU), and a gpt-oss checkpoint with MXFP4 experts
 * split over a Node peer and a wasm tab; each completion (greedy, through the OpenAI API)
 * equals the pure-TypeScript reference's greedy tokens.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect, test } from '@playwright/test';
import OpenAI from 'openai';
import { openCheckpoint } from '../../src/core/model/checkpoint.ts';
import { loadTokenizer } from '../../src/node/tokenizer-files.ts';
import { spawnLocalPeers } from '../../src/node/peer/local-peers.ts';
import { serveHead, type ServingHead } from '../../src/node/serve/serve-head.ts';
import { writeTinyCheckpoint, type TinyCheckpointOptions } from '../fixtures/checkpoints.ts';
import { tinyMoeCheckpoint } from '../fixtures/moe-checkpoints.ts';
import { tinyGptOssCheckpoint } from '../fixtures/gpt-oss-checkpoints.ts';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers, type ReferenceWeights } from '../reference/forward.ts';
import { decodeMxfp4 } from '../reference/gpt-oss-forward.ts';
import { joinTab, SOFTWARE_GPU_DEADLINES, useTempHome, waitForPeers } from './mesh-fixture.ts';
import { createFileByteSource } from '../../src/node/file-byte-source.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'meshnet-moe-e2e-'));
test.beforeAll(() => {
  useTempHome();
});

/** Writes the checkpoint; returns its folder and the reference's greedy ids after `prompt` (stopping at EOS 2). */
async function prepare(name: string, options: TinyCheckpointOptions, prompt: number[], maxTokens: number): Promise<{ dir: string; ids: number[] }> {
  const dir = path.join(root, name);
  await writeTinyCheckpoint(dir, options);
  const checkpoint = await openCheckpoint(createFileByteSource(dir));
  const tensors = new Map<string, Float32Array>();
  for (const [tensor, location] of checkpoint.tensors) {
    if (location.dtype !== 'U8') tensors.set(tensor, await checkpoint.readTensor(tensor));
    if (!tensor.endsWith('_blocks')) continue; // MXFP4 experts as the float export lays them out: [E, in, out]
    const base = tensor.slice(0, -'_blocks'.length);
    const [E, N, G] = location.shape;
    const values = decodeMxfp4(await checkpoint.readTensorBytes(tensor), await checkpoint.readTensorBytes(`${base}_scales`));
    const K = G * 32;
    const t = new Float32Array(values.length);
    for (let e = 0; e < E; e++) for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) t[(e * K + k) * N + n] = values[(e * N + n) * K + k];
    tensors.set(base, t);
  }
  const weights: ReferenceWeights = { get: (n) => tensors.get(n) ?? (() => { throw new Error(`no tensor ${n}`); })() };
  const { config } = checkpoint;
  const all = { start: 0, end: config.numLayers };
  const kv = new ReferenceKvCache();
  const next = (ids: number[]) => {
    const logits = referenceHead(config, weights, referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv).at(-1)!);
    return logits.indexOf(Math.max(...logits));
  };
  const ids: number[] = [];
  let id = next(prompt);
  while (ids.length < maxTokens && id !== 2) {
    ids.push(id);
    id = next([id]);
  }
  if (ids.length < 4) throw new Error(`the reference stopped after ${ids.length} tokens: pick another seed`);
  return { dir, ids };
}

function head(dir: string): Promise<ServingHead> {
  return serveHead({ model: dir, port: 0, host: '127.0.0.1', localPeers: 0, link: 'relay', headLayers: 'none', maxSessions: 4, device: 'cpu', dtype: 'fp32', threads: 1, ...SOFTWARE_GPU_DEADLINES }); // a WebGPU tab on SwiftShader: see SOFTWARE_GPU_DEADLINES
}

const PROMPT = [1, 17, 42, 99, 5];

/** Joined is not yet routed: until a range answered its warm-up frame (#27) a request finds no route (503). */
async function routeWarm(serving: ServingHead): Promise<void> {
  const by = Date.now() + 60_000;
  while (!serving.head.mesh.routeReady()) {
    if (Date.now() > by) throw new Error('the route did not warm up within 60 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// wasm in a tab is the gpt-oss case below; Qwen3-MoE runs on WebGPU here.
for (const device of ['webgpu'] as const) {
  test(`qwen3-moe in a tab on ${device}: greedy equals the reference`, async ({ page }) => {
    const { dir, ids } = await prepare(`qwen3-moe-${device}`, tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'F32', seed: 91 }), PROMPT, 12);
    const serving = await head(dir);
    try {
      await joinTab(page, serving, `autojoin=1&device=${device}`);
      await expect(page.locator('#state')).toHaveText('connected');
      await routeWarm(serving);
      const client = new OpenAI({ baseURL: `${serving.head.url}v1`, apiKey: 'unused' });
      const reply = await client.completions.create({ model: serving.modelId, prompt: PROMPT, max_tokens: 12, temperature: 0 });
      await expect(page.locator('#provider')).toHaveText(device);
      const tokenizer = await loadTokenizer(dir);
      expect(reply.choices[0].text).toBe(tokenizer.decode(ids));
    } finally {
      await serving.close();
    }
  });
}

test('gpt-oss (MXFP4 experts) over a Node peer and a wasm tab: greedy equals the reference', async ({ page }) => {
  const { dir, ids } = await prepare('gpt-oss-mxfp4', tinyGptOssCheckpoint({ dtype: 'BF16', seed: 92, mxfp4: true }), PROMPT, 12);
  const serving = await head(dir);
  const peers = spawnLocalPeers({ count: 1, headUrl: serving.head.peerUrl, joinToken: serving.head.joinToken, link: 'relay', device: 'cpu', threads: 1 });
  try {
    await waitForPeers(serving, 1);
    await joinTab(page, serving, 'autojoin=1&device=wasm&peer-id=local-2');
    await waitForPeers(serving, 2);
    await routeWarm(serving);
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
