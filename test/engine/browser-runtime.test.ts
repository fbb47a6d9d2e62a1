/**
 * The browser peer's onnxruntime-web wiring (src/browser/ort-web-runtime.ts) run in Node:
 * with no WebGPU here, `auto` falls back to wasm, reports it, and reproduces the golden ids.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { BROWSER_DEVICES, browserLoaderOptions } from '../../src/browser/ort-web-runtime.ts';
import { generateLocal } from '../../src/core/route/local-pipeline.ts';
import { validateSamplingParams } from '../../src/core/sampling/index.ts';
import { loadLocalPipeline, openLocalModel } from '../../src/node/local-model.ts';
import { STORIES_DIR, STORIES_GOLDEN, tempDir } from './harness.ts';

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('browser-runtime');
  process.env.MESHNET_HOME = root.dir;
});
afterAll(() => root.remove());

it('auto falls back from webgpu to wasm and generates the golden ids', async () => {
  expect(BROWSER_DEVICES.auto).toEqual(['webgpu', 'wasm']);
  const model = await openLocalModel(STORIES_DIR);
  const loader = browserLoaderOptions({ device: 'auto' });
  const p = await loadLocalPipeline(model, { ranges: [{ start: 0, end: 3 }, { start: 3, end: 5 }], device: 'auto', dtype: 'fp32', loader });
  try {
    expect(p.devices).toEqual(['wasm', 'wasm', 'wasm']);
    const ids: number[] = [];
    for await (const t of generateLocal(p, [1], validateSamplingParams({ temperature: 0, maxTokens: 32 }), randomUUID())) ids.push(t.tokenId);
    expect(ids).toEqual(STORIES_GOLDEN);
  } finally {
    await p.dispose();
  }
});

it('refuses an unknown device naming the valid ones', () => {
  expect(() => browserLoaderOptions({ device: 'cuda' })).toThrow(/unknown device 'cuda': expected one of auto, webgpu, wasm/);
});
