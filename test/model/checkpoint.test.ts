import { mkdtemp, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headTensorNames, layerTensorNames, requiredTensors } from '../../src/core/model/architectures.ts';
import { openCheckpoint } from '../../src/core/model/checkpoint.ts';
import { CheckpointError } from '../../src/core/model/checkpoint-error.ts';
import { parseSafetensorsHeader, writeSafetensors } from '../../src/core/model/safetensors.ts';
import type { ByteSource } from '../../src/core/model/byte-source.ts';
import { createFileByteSource } from '../../src/node/file-byte-source.ts';
import { TINY_PRESETS, writeTinyCheckpoint, type TinyCheckpointOptions } from '../fixtures/checkpoints.ts';

const STORIES = path.resolve(import.meta.dirname, '../fixtures/models/stories260k');

let root: string;
let counter = 0;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'meshnet-checkpoint-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function fixture(options: TinyCheckpointOptions): Promise<string> {
  const dir = path.join(root, `c${counter++}`);
  await writeTinyCheckpoint(dir, options);
  return dir;
}

async function refusal(dir: string): Promise<CheckpointError> {
  const error = await openCheckpoint(createFileByteSource(dir)).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CheckpointError);
  return error as CheckpointError;
}

describe('openCheckpoint on fixtures', () => {
  for (const [preset, options] of Object.entries(TINY_PRESETS)) {
    for (const dtype of ['F32', 'F16', 'BF16'] as const) {
      for (const sharded of [false, true]) {
        it(`${preset} ${dtype}${sharded ? ' sharded' : ''}`, async () => {
          const checkpoint = await openCheckpoint(createFileByteSource(await fixture({ ...options, dtype, seed: 7, sharded })));
          const { config } = checkpoint;
          expect(config.architecture).toBe(options.architecture);
          expect(checkpoint.tensors.size).toBe(requiredTensors(config).length);
          expect(checkpoint.files.map((f) => f.name)).toEqual(
            sharded ? ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'] : ['model.safetensors'],
          );
          expect(checkpoint.weightsFile).toBe(sharded ? 'model.safetensors.index.json' : 'model.safetensors');
          for (const location of checkpoint.tensors.values()) expect(location.dtype).toBe(dtype);
          const q = await checkpoint.readTensor(layerTensorNames(config, 1).qProj);
          expect(q.length).toBe(config.numHeads * config.headDim * config.hiddenSize);
          expect(q.every(Number.isFinite)).toBe(true);
        });
      }
    }
  }

  it('gives presets their architecture features', async () => {
    const open = async (options: TinyCheckpointOptions) => (await openCheckpoint(createFileByteSource(await fixture(options)))).config;
    const llama3 = await open({ ...TINY_PRESETS.llama3, dtype: 'F32', seed: 1 });
    expect(llama3.rope.llama3?.factor).toBe(8);
    const qwen3 = await open({ ...TINY_PRESETS.qwen3, dtype: 'F32', seed: 1 });
    expect([qwen3.qkNorm, qwen3.headDim, qwen3.hiddenSize / qwen3.numHeads]).toEqual([true, 32, 16]);
    const qwen2 = await open({ ...TINY_PRESETS.qwen2, dtype: 'F32', seed: 1 });
    expect([qwen2.attentionBias, qwen2.slidingWindow]).toEqual([true, undefined]);
    expect((await open({ ...TINY_PRESETS.mistral, dtype: 'F32', seed: 1 })).slidingWindow).toBe(4096);
    const untied = await open({ ...TINY_PRESETS.llamaUntied, dtype: 'F32', seed: 1 });
    expect(headTensorNames(untied).lmHead).toBe('lm_head.weight');
  });

  it('is deterministic, and F16/BF16 hold the same weights as F32 (rounded)', async () => {
    const open = async (dtype: 'F32' | 'F16' | 'BF16', sharded = false) =>
      openCheckpoint(createFileByteSource(await fixture({ ...TINY_PRESETS.qwen2, dtype, seed: 42, sharded })));
    const [a, b, half, brain] = await Promise.all([open('F32'), open('F32', true), open('F16'), open('BF16')]);
    for (const name of [headTensorNames(a.config).embedTokens, 'model.layers.3.self_attn.k_proj.bias', 'model.norm.weight']) {
      const exact = await a.readTensor(name);
      expect(await b.readTensor(name)).toEqual(exact);
      const f16 = await half.readTensor(name);
      const bf16 = await brain.readTensor(name);
      exact.forEach((v, i) => {
        expect(Math.abs(f16[i] - v)).toBeLessThanOrEqual(Math.abs(v) * 2 ** -11 + 1e-7);
        expect(Math.abs(bf16[i] - v)).toBeLessThanOrEqual(Math.abs(v) * 2 ** -8 + 1e-7);
      });
    }
    const norm = await a.readTensor('model.norm.weight');
    expect(Math.max(...norm.map((v) => Math.abs(v - 1)))).toBeLessThan(0.3);
  });

  it('reads only the requested tensor bytes', async () => {
    const files = createFileByteSource(await fixture({ ...TINY_PRESETS.llama, dtype: 'F16', seed: 3 }));
    const reads: [string, number, number][] = [];
    const spy: ByteSource = { ...files, read: (file, offset, length) => (reads.push([file, offset, length]), files.read(file, offset, length)) };
    const checkpoint = await openCheckpoint(spy);
    reads.length = 0;
    const location = checkpoint.tensors.get('model.layers.2.mlp.down_proj.weight')!;
    const bytes = await checkpoint.readTensorBytes(location.name);
    expect(reads).toEqual([['model.safetensors', location.offset, location.length]]);
    expect(bytes.byteLength).toBe(64 * 96 * 2);
  });
});

describe('openCheckpoint on stories260k', () => {
  it('opens the real checkpoint', async () => {
    const checkpoint = await openCheckpoint(createFileByteSource(STORIES));
    const { config } = checkpoint;
    expect(config).toMatchObject({ architecture: 'LlamaForCausalLM', hiddenSize: 64, numLayers: 5, numHeads: 8, numKvHeads: 4, headDim: 8 });
    expect(config.eosTokenIds).toEqual([2]);
    expect(checkpoint.tensors.size).toBe(2 + 5 * 9);
    const embed = await checkpoint.readTensor('model.embed_tokens.weight');
    expect(embed.length).toBe(512 * 64);
    // Cross-check one value against a direct read of the file.
    const raw = new Uint8Array(await readFile(path.join(STORIES, 'model.safetensors')));
    const location = parseSafetensorsHeader('model.safetensors', raw, raw.byteLength).get('model.embed_tokens.weight')!;
    expect(embed[100]).toBe(new DataView(raw.buffer, raw.byteOffset).getFloat32(location.offset + 400, true));
  });
});

describe('openCheckpoint refusals', () => {
  const base = { ...TINY_PRESETS.llama, dtype: 'F32', seed: 5 } as const;

  it('names a missing tensor and its weights file', async () => {
    const error = await refusal(await fixture({ ...base, omitTensors: ['model.layers.3.mlp.up_proj.weight'] }));
    expect(error.file).toBe('model.safetensors');
    expect(error.message).toBe("model.safetensors: tensor 'model.layers.3.mlp.up_proj.weight' (shape [96, 64]) is missing");
    const untied = await refusal(await fixture({ ...TINY_PRESETS.llamaUntied, dtype: 'F32', seed: 5, sharded: true, omitTensors: ['lm_head.weight'] }));
    expect(untied.file).toBe('model.safetensors.index.json');
    expect(untied.message).toMatch(/'lm_head.weight'/);
  });

  it('names a misshaped tensor, its file and the expected shape', async () => {
    const dir = await fixture(base);
    const file = path.join(dir, 'model.safetensors');
    const raw = new Uint8Array(await readFile(file));
    const tensors = [...parseSafetensorsHeader('model.safetensors', raw, raw.byteLength).values()].map((t) => ({
      name: t.name,
      dtype: t.dtype,
      shape: t.name === 'model.layers.1.self_attn.k_proj.weight' ? [64, 32] : [...t.shape],
      data: raw.subarray(t.offset, t.offset + t.length),
    }));
    await writeFile(file, writeSafetensors(tensors));
    const error = await refusal(dir);
    expect(error.file).toBe('model.safetensors');
    expect(error.message).toMatch(/'model.layers.1.self_attn.k_proj.weight' has shape \[64, 32\], expected \[32, 64\]/);
  });

  it('refuses a folder without config.json or without weights', async () => {
    const noConfig = await fixture(base);
    await unlink(path.join(noConfig, 'config.json'));
    expect((await refusal(noConfig)).message).toBe(`config.json: not found in ${path.resolve(noConfig)}`);
    const noWeights = await fixture(base);
    await unlink(path.join(noWeights, 'model.safetensors'));
    expect((await refusal(noWeights)).message).toMatch(/model.safetensors: not found in .* \(nor model.safetensors.index.json\)/);
  });

  it('refuses config.json that is not JSON', async () => {
    const dir = await fixture(base);
    await writeFile(path.join(dir, 'config.json'), '{ nope');
    const error = await refusal(dir);
    expect([error.file, error.message]).toEqual(['config.json', expect.stringMatching(/is not valid JSON/)]);
  });

  describe('index', () => {
    const sharded = { ...base, sharded: true };
    const editIndex = async (dir: string, edit: (index: { weight_map: Record<string, unknown> }) => unknown) => {
      const file = path.join(dir, 'model.safetensors.index.json');
      await writeFile(file, JSON.stringify(edit(JSON.parse(await readFile(file, 'utf8')))));
    };

    it('refuses a missing shard file', async () => {
      const dir = await fixture(sharded);
      await unlink(path.join(dir, 'model-00002-of-00002.safetensors'));
      expect((await refusal(dir)).message).toMatch(/index.json: names 'model-00002-of-00002.safetensors', which is not in/);
    });

    it('refuses a tensor listed in the wrong file', async () => {
      const dir = await fixture(sharded);
      await editIndex(dir, (index) => ({ ...index, weight_map: { ...index.weight_map, 'model.norm.weight': 'model-00001-of-00002.safetensors' } }));
      expect((await refusal(dir)).message).toMatch(/lists tensor 'model.norm.weight' in 'model-00001-of-00002.safetensors', but that file does not contain it/);
    });

    it('refuses a malformed weight_map and paths outside the folder', async () => {
      const dir = await fixture(sharded);
      await editIndex(dir, () => ({ weight_map: [] }));
      expect((await refusal(dir)).message).toMatch(/field 'weight_map' must be an object/);
      await editIndex(dir, () => ({ weight_map: { 'model.norm.weight': '../../etc/passwd' } }));
      expect((await refusal(dir)).message).toMatch(/not a file inside the checkpoint folder/);
    });

    it('refuses a corrupt shard, naming it', async () => {
      const dir = await fixture(sharded);
      await writeFile(path.join(dir, 'model-00001-of-00002.safetensors'), new Uint8Array(4));
      const error = await refusal(dir);
      expect(error.file).toBe('model-00001-of-00002.safetensors');
      expect(error.message).toMatch(/shorter than the 8-byte/);
    });
  });
});

describe('createFileByteSource', () => {
  it('reads exact ranges and refuses names outside the folder', async () => {
    const source = createFileByteSource(STORIES);
    expect(await source.exists('config.json')).toBe(true);
    expect(await source.exists('nope.json')).toBe(false);
    expect(await source.exists('../../DESIGN.md')).toBe(false);
    await expect(source.readText('../../../etc/hostname')).rejects.toThrow(/outside the checkpoint folder/);
    const size = await source.size('model.safetensors');
    expect((await source.read('model.safetensors', size - 10, 10)).byteLength).toBe(10);
    await expect(source.read('model.safetensors', size - 10, 11)).rejects.toThrow(/past the end/);
  });
});
