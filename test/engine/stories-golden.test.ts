/**
 * The stories260k numerical fixture (its layer weights do not make a working model: its text
 * is not readable; it stays because its golden ids come from an independent implementation):
 * greedy generation from `<s>` reproduces the golden ids of llama2.c's run.c (its README)
 * for every split of its 5 layers, on
 * onnxruntime-node's CPU provider and onnxruntime-web's wasm, in fp32 and fp16 — and on
 * onnxruntime-node's WebGPU provider over software Vulkan where Chromium's SwiftShader is
 * installed (.ci/run installs it).
 */
import { existsSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateLocal } from '../../src/core/route/local-pipeline.ts';
import { rangesFromSplit } from '../../src/core/mesh/split.ts';
import { validateSamplingParams } from '../../src/core/sampling/index.ts';
import { openLocalModel, type LocalModel } from '../../src/node/local-model.ts';
import { runCli } from '../cli/run-cli.ts';
import { pipeline, STORIES_DIR, STORIES_GOLDEN, tempDir } from './harness.ts';

/** All 16 ways to cut 5 layers into contiguous shards. */
function everySplit(layers: number): number[][] {
  const out: number[][] = [];
  for (let mask = 0; mask < 1 << (layers - 1); mask++) {
    out.push([...Array(layers - 1).keys()].map((i) => i + 1).filter((p) => mask & (1 << (p - 1))));
  }
  return out;
}

let root: { dir: string; remove: () => Promise<void> };
let model: LocalModel;
beforeAll(async () => {
  root = await tempDir('golden');
  process.env.MESHNET_HOME = root.dir;
  model = await openLocalModel(STORIES_DIR);
});
afterAll(() => root.remove());

async function greedy(splits: number[], device: string, dtype: 'fp32' | 'fp16' = 'fp32'): Promise<number[]> {
  const p = await pipeline(model, rangesFromSplit(5, splits), device, dtype);
  const params = validateSamplingParams({ temperature: 0, maxTokens: STORIES_GOLDEN.length });
  const ids: number[] = [];
  try {
    for await (const token of generateLocal(p, [1], params, randomUUID())) ids.push(token.tokenId);
  } finally {
    await p.dispose();
  }
  return ids;
}

describe('stories260k golden sequence', () => {
  it('has 16 splits to try', () => expect(everySplit(5)).toHaveLength(16));
  for (const device of ['cpu', 'wasm']) {
    it(`every split on ${device}`, async () => {
      for (const splits of everySplit(5)) expect(await greedy(splits, device), `split [${splits}]`).toEqual(STORIES_GOLDEN);
    });
  }
  it('fp16 activations on cpu and wasm', async () => {
    expect(await greedy([2], 'cpu', 'fp16')).toEqual(STORIES_GOLDEN);
    expect(await greedy([2], 'wasm', 'fp16')).toEqual(STORIES_GOLDEN);
  });

  const swiftshader = '/usr/lib/chromium/vk_swiftshader_icd.json';
  // Skipped only where Chromium (and so its software Vulkan) is not installed; .ci/run installs it.
  it.skipIf(!existsSync(swiftshader))('on onnxruntime-node WebGPU over SwiftShader (KV kept on the GPU)', async () => {
    const env = { LD_LIBRARY_PATH: '/usr/lib/chromium', VK_ICD_FILENAMES: swiftshader, MESHNET_HOME: root.dir };
    // Three shards in one process (each its own WebGPU session and GPU-held KV); one shard holding
    // every layer on WebGPU is checked by test/kv/kv-pool.test.ts and test/cli/weights-cli.test.ts.
    const args = ['generate', '--model', STORIES_DIR, '--prompt-ids', '1', '--max-tokens', '32', '--temperature', '0', '--device', 'webgpu', '--json', '--split', '1,3'];
    const result = await runCli(args, env);
    expect(result.code, result.stderr).toBe(0);
    const out = JSON.parse(result.stdout);
    expect(out.device).toBe('webgpu');
    expect(out.token_ids).toEqual(STORIES_GOLDEN);
  }, 120_000);
});
