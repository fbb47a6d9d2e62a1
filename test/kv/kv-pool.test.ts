/**
 * The KV pool against the unpooled path. A fixture with a 1,536-position context is fed the
 * same reference tokens (teacher forcing: logits are compared, not greedy tokens, since
 * random weights have near-ties) for 1,040 positions, with one rollback (a step whose start
 * is below the KV length truncates it): the pooled pipeline's logits equal the unpooled
 * path's within 1e-4 at every position, on onnxruntime-node's CPU provider, on
 * onnxruntime-web's wasm, and on onnxruntime-node's WebGPU provider over SwiftShader (KV in
 * GPU buffers; in a child process, which software Vulkan needs; SwiftShader is slow, so there
layer 0 only, the first 1,016 positions 16 per step and the last 24 one per step). After release, the
 * session's KV bytes are back to zero.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { KV_BLOCK_POSITIONS } from '../../src/core/runtime/kv-state.ts';
import { loadLocalPipeline } from '../../src/node/local-model.ts';
import { useKvModel } from './kv-model.ts';
import { referenceTokens, teacherForce } from './teacher-forcing.ts';

const POSITIONS = 1040;
const kv = useKvModel('long', 17, 1536);

describe('KV pool', () => {
  for (const device of ['cpu', 'wasm']) {
    it(`equals the unpooled path within 1e-4 at every one of ${POSITIONS} positions on ${device}, and frees to zero`, async () => {
      const ranges = [{ start: 0, end: 1 }, { start: 1, end: 2 }];
      const pooled = await loadLocalPipeline(kv.model, { ranges, device, dtype: 'fp32', threads: 1 });
      const reference = await loadLocalPipeline(kv.model, { ranges, device, dtype: 'fp32', threads: 1, kvMode: 'replace' });
      try {
        expect(pooled.stages.map((s) => (s.executor as { kvMode?: string }).kvMode)).toEqual(['pool', 'pool']);
        const sessionId = randomUUID();
        const tokens = referenceTokens(POSITIONS, kv.model.checkpoint.config.vocabSize);
        const result = await teacherForce(pooled, reference, tokens, { chunk: 5, singleFrom: 5, rollbackAt: 700, rollbackBy: 3, sessionId });
        expect(result.steps).toBeGreaterThan(POSITIONS - 5);
        expect(result.maxDiff, `worst at position ${result.worstPosition}`).toBeLessThan(1e-4);
        for (const stage of pooled.stages) {
          const kv = stage.kv.find(sessionId, stage.executor.range)!;
          expect(kv.length).toBe(POSITIONS);
          // Grown in blocks: the capacity is the next block boundaries, not one buffer per step.
          expect(kv.capacity % KV_BLOCK_POSITIONS).toBe(0);
          expect(kv.capacity).toBeGreaterThanOrEqual(POSITIONS);
          expect(kv.capacity, 'not the whole context up front').toBeLessThan(POSITIONS + KV_BLOCK_POSITIONS);
          expect(stage.kv.bytes).toBeGreaterThan(0);
          expect(stage.kv.release(sessionId)).toBe(1);
          expect(stage.kv.bytes).toBe(0);
          expect(stage.kv.size).toBe(0);
        }
      } finally {
        await pooled.dispose();
        await reference.dispose();
      }
    }, 120_000);
  }

  const swiftshader = '/usr/lib/chromium/vk_swiftshader_icd.json';
  // Skipped only where Chromium (and so its software Vulkan) is not installed; .ci/run installs it.
  it.skipIf(!existsSync(swiftshader))('on onnxruntime-node WebGPU over SwiftShader (KV in GPU buffers) equals the unpooled CPU path within 1e-4', async () => {
    const env = { ...process.env, LD_LIBRARY_PATH: '/usr/lib/chromium', VK_ICD_FILENAMES: swiftshader, MESHNET_HOME: kv.home };
    const child = path.join(import.meta.dirname, 'pool-webgpu-child.ts');
    const out = await new Promise<string>((resolve, reject) => {
      const p = spawn(process.execPath, ['--import', 'tsx', child, path.join(kv.home, 'long'), String(POSITIONS)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d) => (stdout += d));
      p.stderr.on('data', (d) => (stderr += d));
      p.on('error', reject);
      p.on('close', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`child exited ${code}: ${stderr.slice(-2000)}`))));
    });
    const result = JSON.parse(out.trim().split('\n').at(-1)!);
    expect(result.device).toBe('webgpu');
    expect(result.positions).toBe(POSITIONS);
    expect(result.steps).toBeGreaterThan(40);
    expect(result.maxDiff, `worst at position ${result.worstPosition}`).toBeLessThan(1e-4);
    expect(result.kvBefore).toBeGreaterThan(0);
    expect(result.kvAfter).toBe(0);
  }, 180_000);
});
