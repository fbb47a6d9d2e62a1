/**
 * The bench's checkpoint generator in bf16 (the Llama-3.2-1B-shaped bench model's format): a
 * small shape written as BF16 reads back (through meshnet's own checkpoint reader) as the
 * F32 checkpoint of the same seed rounded to bf16, written in chunks across tensor
 * boundaries; and the rounding is to nearest even.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bf16Bits, generateCheckpoint, LLAMA_3_2_1B_SHAPE, type GeneratedShape } from '../../bench/generate-checkpoint.ts';
import { openLocalModel } from '../../src/node/local-model.ts';
import { tempDir } from '../engine/harness.ts';

const SMALL: GeneratedShape = { ...LLAMA_3_2_1B_SHAPE, hiddenSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 96, vocabSize: 33_000, maxPositionEmbeddings: 256 };
let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('generate-checkpoint');
});
afterAll(() => root.remove());

const fromBits = (bits: number) => new Float32Array(new Uint32Array([bits << 16]).buffer)[0]!;

describe('bench checkpoint generator', () => {
  it('bf16 rounds to nearest even and keeps NaN a NaN', () => {
    const f = (x: number) => new Float32Array(new Uint32Array([x]).buffer);
    expect(bf16Bits(f(0x3f808000))[0]).toBe(0x3f80); // halfway, even below: stays
    expect(bf16Bits(f(0x3f818000))[0]).toBe(0x3f82); // halfway, odd below: up
    expect(bf16Bits(f(0x3f808001))[0]).toBe(0x3f81); // above halfway: up
    expect(Number.isNaN(fromBits(bf16Bits(f(0x7f800001))[0]!))).toBe(true);
    expect(bf16Bits(new Float32Array([1, -2, 0.5]))).toEqual(new Uint16Array([0x3f80, 0xc000, 0x3f00]));
  });

  it('a BF16 checkpoint reads back as the same seed in F32, rounded', async () => {
    const bf16 = await openLocalModel(await generateCheckpoint(path.join(root.dir, 'bf16'), SMALL));
    const fp32 = await openLocalModel(await generateCheckpoint(path.join(root.dir, 'fp32'), { ...SMALL, dtype: 'F32' }));
    expect(bf16.checkpoint.config.hiddenSize).toBe(128);
    expect(bf16.checkpoint.config.tieWordEmbeddings).toBe(true);
    expect(bf16.checkpoint.config.rope.theta).toBe(500000);
    // 33,000 × 128 = 4.22 M values: the embedding spans two write chunks.
    for (const name of ['model.embed_tokens.weight', 'model.layers.1.mlp.down_proj.weight', 'model.norm.weight']) {
      expect(bf16.checkpoint.tensors.get(name)!.dtype).toBe('BF16');
      const a = await bf16.checkpoint.readTensor(name);
      const b = await fp32.checkpoint.readTensor(name);
      expect(a.length).toBe(b.length);
      const rounded = bf16Bits(b);
      let mismatches = 0;
      let differ = 0;
      for (let i = 0; i < a.length; i++) {
        if (a[i] !== fromBits(rounded[i]!)) mismatches++;
        if (a[i] !== b[i]) differ++;
      }
      expect(mismatches).toBe(0);
      expect(differ).toBeGreaterThan(a.length / 2); // really bf16, not the F32 values
    }
  });
});
