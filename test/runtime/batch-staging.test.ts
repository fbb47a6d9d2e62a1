import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { BatchStaging } from '../../src/core/runtime/batch-staging.ts';
import { KV_BLOCK_POSITIONS } from '../../src/core/runtime/kv-state.ts';

const HEADS = 2;
const D = 4;

/** A pooled past [1, HEADS, capacity, D] whose value at (h, p, d) is base + h*1000 + p*10 + d. */
function past(capacity: number, base: number): ort.Tensor {
  const data = new Float32Array(HEADS * capacity * D);
  for (let h = 0; h < HEADS; h++) for (let p = 0; p < capacity; p++) for (let d = 0; d < D; d++) data[(h * capacity + p) * D + d] = base + h * 1000 + p * 10 + d;
  return new ort.Tensor('float32', data, [1, HEADS, capacity, D]);
}

describe('BatchStaging', () => {
  it("copies each entry's valid positions into one [B, heads, block-rounded longest, D] tensor", () => {
    const staging = new BatchStaging(ort as never, HEADS, D, 'fp32');
    const run = staging.begin();
    const t = run.stage([past(512, 0), past(256, 100_000)], [300, 7]);
    expect(t.dims).toEqual([2, HEADS, 2 * KV_BLOCK_POSITIONS, D]);
    const cap = t.dims[2];
    const data = t.data as Float32Array;
    const at = (b: number, h: number, p: number, d: number) => data[((b * HEADS + h) * cap + p) * D + d];
    expect(at(0, 1, 299, 3)).toBe(1000 + 2990 + 3);
    expect(at(1, 1, 6, 2)).toBe(100_000 + 1000 + 60 + 2);
    run.done();
  });

  it('keeps only the last run idle as contexts grow (no pile of stale buffers outside the KV budget)', () => {
    const staging = new BatchStaging(ort as never, HEADS, D, 'fp32');
    let lastRun = 0;
    for (let longest = 10; longest < 8 * KV_BLOCK_POSITIONS; longest += KV_BLOCK_POSITIONS) {
      const run = staging.begin();
      lastRun = 0;
      for (let layer = 0; layer < 6; layer++) lastRun += (run.stage([past(longest + 1, 0), past(8, 0)], [longest, 8]).data as Float32Array).byteLength;
      run.done();
      // The buffers may be up to 1.25× what a run used, and only the last run's are kept.
      expect(staging.idleBytes).toBeLessThanOrEqual(Math.ceil(lastRun * 1.25) + 6 * 4);
    }
    expect(staging.idleBytes).toBeGreaterThan(0);
  });
});
