/**
 * Checkpoints that come pre-quantized, as users download them: a random Llama and a random
 * Qwen2 packed as GPTQ (v1, with and without act-order) and AWQ (GEMM). Their shard graphs
 * (the 4-bit values repacked onto MatMulNBits, no float round trip) equal the reference
 * forward pass over the weights the checkpoint's own tensors stand for (the published
 * dequantization formula, test/fixtures/prequantized.ts), and bad tensors are refused with
 * errors naming the tensor and file.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CheckpointError } from '../../src/core/model/checkpoint-error.ts';
import { toFloat32 } from '../../src/core/model/dtype.ts';
import { resolveWeightSpec, WeightSpecError } from '../../src/core/model/quant/weight-format.ts';
import { layerTensorNames } from '../../src/core/model/architectures.ts';
import { openLocalModel, type LocalModel } from '../../src/node/local-model.ts';
import { getShardArtifact } from '../../src/node/artifact-cache.ts';
import { writeSafetensors, type SafetensorsInput } from '../../src/core/model/safetensors.ts';
import { buildTinyCheckpointFiles, TINY_PRESETS, writeTinyCheckpoint, type TinyCheckpointOptions } from '../fixtures/checkpoints.ts';
import { dequantizePrequantized, type PrequantizeOptions } from '../fixtures/prequantized.ts';
import { fixtureModel, maxAbsDiff, pipeline, stepLogits, tempDir } from '../engine/harness.ts';
import { dequantizedReference } from '../reference/dequantized-weights.ts';
import { ReferenceKvCache, referenceEmbed, referenceHead, referenceLayers, type ReferenceWeights } from '../reference/forward.ts';

const LAYOUTS: Record<string, Omit<PrequantizeOptions, 'random'>> = {
  'GPTQ': { method: 'gptq', groupSize: 32 },
  'GPTQ act-order': { method: 'gptq', groupSize: 32, actOrder: true },
  'AWQ': { method: 'awq', groupSize: 32 },
  // A layer module left in float (modules_to_not_convert): quantized by meshnet's own q4 beside the repacked ones.
  'AWQ, one module in float': { method: 'awq', groupSize: 32, floatModules: ['model.layers.1.mlp.down_proj'] },
};
const PROMPT = [1, 17, 42, 99, 5, 64];
const DECODE = [7, 120, 33];
const LINEARS = ['qProj', 'kProj', 'vProj', 'oProj', 'gateProj', 'upProj', 'downProj'] as const;

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('prequantized');
  process.env.MESHNET_HOME = root.dir + '/home';
});
afterAll(() => root.remove());

/** The checkpoint's own linear weights, dequantized by the published formula. */
async function checkpointLinears(model: LocalModel): Promise<Map<string, Float32Array>> {
  const { config, source, tensors } = model.checkpoint;
  const q = config.quantization!;
  const read = async (name: string) => {
    const t = tensors.get(name)!;
    return (await source.read(t.file, t.offset, t.length)).slice();
  };
  const out = new Map<string, Float32Array>();
  for (let l = 0; l < config.numLayers; l++) {
    const names = layerTensorNames(config, l);
    for (const key of LINEARS) {
      const base = names[key].slice(0, -'.weight'.length);
      if (!tensors.has(`${base}.qweight`)) continue; // left in float: quantized by meshnet's own q4
      const scales = tensors.get(`${base}.scales`)!;
      const [, N] = scales.shape;
      const K = q.method === 'gptq' ? tensors.get(`${base}.qweight`)!.shape[0] * 8 : tensors.get(`${base}.qweight`)!.shape[0];
      const w = dequantizePrequantized(
        q.method,
        {
          qweight: new Int32Array((await read(`${base}.qweight`)).buffer),
          qzeros: new Int32Array((await read(`${base}.qzeros`)).buffer),
          scales: toFloat32(await read(`${base}.scales`), 'F16'),
          ...(tensors.has(`${base}.g_idx`) ? { gIdx: new Int32Array((await read(`${base}.g_idx`)).buffer) } : {}),
        },
        N,
        K,
        q.groupSize,
      );
      out.set(names[key], w);
    }
  }
  return out;
}

describe('pre-quantized checkpoints equal the reference over their dequantized weights (accuracy level 0)', () => {
  for (const [arch, preset] of [
    ['Llama', TINY_PRESETS.llama],
    ['Qwen2', TINY_PRESETS.qwen2],
  ] as const) {
    for (const [layout, prequantize] of Object.entries(LAYOUTS)) {
      it(`${arch}, ${layout}`, async () => {
        const model = await fixtureModel(root.dir, `${arch}-${layout.replace(/\W+/g, '-')}`, { ...preset, dtype: 'F16', seed: 51, prequantize });
        const { config } = model.checkpoint;
        expect(config.quantization?.method).toBe(prequantize.method);
        const spec = resolveWeightSpec(config, 'fp32', { accuracyLevel: 0 });
        expect(spec.format).toBe('q4');

        // The MatMulNBits tensors hold exactly the checkpoint's weights (every linear).
        const repacked = await dequantizedReference(model, 'fp32', spec);
        const original = await checkpointLinears(model);
        expect(original.size, 'the checkpoint has pre-quantized linears').toBeGreaterThan(0);
        for (const [name, w] of original) expect(maxAbsDiff(repacked.get(name), w), name).toBe(0);
        const weights: ReferenceWeights = { get: (name) => original.get(name) ?? repacked.get(name), has: (name) => original.has(name) || repacked.has!(name) };

        const p = await pipeline(model, [{ start: 0, end: 2 }, { start: 2, end: config.numLayers }], 'cpu', 'fp32', spec);
        try {
          const kv = new ReferenceKvCache();
          const all = { start: 0, end: config.numLayers };
          const expected = (ids: number[]) => {
            const hidden = referenceLayers(config, weights, referenceEmbed(config, weights, ids), all, kv);
            return referenceHead(config, weights, hidden[hidden.length - 1]);
          };
          expect(maxAbsDiff(await stepLogits(p, 's', PROMPT, 0), expected(PROMPT))).toBeLessThan(1e-3);
          let position = PROMPT.length;
          for (const id of DECODE) expect(maxAbsDiff(await stepLogits(p, 's', [id], position++), expected([id]))).toBeLessThan(1e-3);
        } finally {
          await p.dispose();
        }
      });
    }
  }
});

/** A GPTQ Llama fixture folder with `edit` applied to its config or tensors. */
async function editedCheckpoint(name: string, edit: { config?: (c: Record<string, unknown>) => void; tensors?: (t: SafetensorsInput[]) => SafetensorsInput[] }, options: Partial<TinyCheckpointOptions> = {}): Promise<string> {
  const dir = path.join(root.dir, name);
  const base: TinyCheckpointOptions = { ...TINY_PRESETS.llama, dtype: 'F16', seed: 52, prequantize: LAYOUTS.GPTQ, ...options };
  await writeTinyCheckpoint(dir, base);
  if (edit.config) {
    const config = JSON.parse(await readFile(path.join(dir, 'config.json'), 'utf8'));
    edit.config(config);
    const { writeFile } = await import('node:fs/promises');
    await writeFile(path.join(dir, 'config.json'), JSON.stringify(config));
  }
  if (edit.tensors) {
    const files = buildTinyCheckpointFiles(base);
    const { parseSafetensorsHeader } = await import('../../src/core/model/safetensors.ts');
    const bytes = files.get('model.safetensors') as Uint8Array;
    const header = parseSafetensorsHeader('model.safetensors', bytes, bytes.byteLength);
    const inputs: SafetensorsInput[] = [...header.values()].map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, data: bytes.slice(t.offset, t.offset + t.length) }));
    const { writeFile } = await import('node:fs/promises');
    await writeFile(path.join(dir, 'model.safetensors'), writeSafetensors(edit.tensors(inputs), { format: 'pt' }));
  }
  return dir;
}

async function refusal(dir: string): Promise<CheckpointError> {
  const error = await openLocalModel(dir).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CheckpointError);
  return error as CheckpointError;
}

const Q = 'model.layers.0.self_attn.q_proj';

describe('bad pre-quantized checkpoints are refused with typed errors naming the tensor and file', () => {
  it('other methods and bit widths, naming what is supported', async () => {
    for (const [name, quant, pattern] of [
      ['bnb', { quant_method: 'bitsandbytes', load_in_4bit: true }, /quant_method "bitsandbytes" is not supported \(supported: quant_method "gptq".*"awq"/],
      ['gptq8', { quant_method: 'gptq', bits: 8, group_size: 32 }, /gptq with bits 8 is not supported/],
      ['gemv', { quant_method: 'awq', bits: 4, group_size: 32, version: 'gemv' }, /awq version "gemv" is not supported/],
      ['marlin', { quant_method: 'gptq', bits: 4, group_size: 32, checkpoint_format: 'marlin' }, /checkpoint_format "marlin" is not supported/],
    ] as const) {
      const error = await refusal(await editedCheckpoint(name, { config: (c) => (c.quantization_config = quant) }));
      expect(error.file).toBe('config.json');
      expect(error.message).toMatch(pattern);
    }
  });

  it('a group size that does not divide the input dimension', async () => {
    const error = await refusal(await editedCheckpoint('group48', { config: (c) => ((c.quantization_config as Record<string, unknown>).group_size = 48) }));
    expect(error.file).toBe('model.safetensors');
    expect(error.message).toMatch(new RegExp(`tensor '${Q}.qweight': group size 48 does not divide the input dimension 64`));
  });

  it('a missing scales or qzeros tensor', async () => {
    for (const missing of ['scales', 'qzeros']) {
      const error = await refusal(await editedCheckpoint(`missing-${missing}`, {}, { omitTensors: [`${Q}.${missing}`] }));
      expect(error.message).toMatch(new RegExp(`tensor '${Q}\\.${missing}' is missing`));
    }
  });

  it('a linear that has a float weight beside a broken qweight: the qweight, which is what gets packed, is checked', async () => {
    const error = await refusal(
      await editedCheckpoint('weight-and-qweight', {
        tensors: (ts) => [...ts.filter((t) => t.name !== `${Q}.qzeros`), { name: `${Q}.weight`, dtype: 'F16', shape: [64, 64], data: new Uint8Array(64 * 64 * 2) }],
      }),
    );
    expect(error.message).toMatch(new RegExp(`tensor '${Q}\\.qzeros' is missing`));
  });

  it('tensors of the wrong shape or dtype', async () => {
    const wrongShape = await refusal(
      await editedCheckpoint('shape', { tensors: (ts) => ts.map((t) => (t.name === `${Q}.qweight` ? { ...t, shape: [4, 128], data: t.data } : t)) }),
    );
    expect(wrongShape.file).toBe('model.safetensors');
    expect(wrongShape.message).toMatch(new RegExp(`tensor '${Q}.qweight': has shape \\[4, 128\\], expected \\[8, 64\\]`));
    const wrongDtype = await refusal(
      await editedCheckpoint('dtype', { tensors: (ts) => ts.map((t) => (t.name === `${Q}.qzeros` ? { ...t, dtype: 'F32' } : t)) }),
    );
    expect(wrongDtype.message).toMatch(new RegExp(`tensor '${Q}.qzeros': is F32, expected I32`));
  });

  it('act-order g_idx in a checkpoint that says desc_act false, found when its artifact is built', async () => {
    const dir = await editedCheckpoint('act-order-lie', { config: (c) => ((c.quantization_config as Record<string, unknown>).desc_act = false) }, { prequantize: LAYOUTS['GPTQ act-order'] });
    const model = await openLocalModel(dir);
    const spec = resolveWeightSpec(model.checkpoint.config, 'fp32');
    const error = await getShardArtifact(model.checkpoint, model.key, { kind: 'layers', range: { start: 0, end: 1 } }, 'fp32', spec).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as Error).message).toMatch(new RegExp(`tensor '${Q}.g_idx': row \\d+ is in group \\d+, not \\d+: g_idx is act-order but quantization_config.desc_act is false`));
  });

  it('a weight format other than q4', async () => {
    const model = await openLocalModel(await editedCheckpoint('q8', {}));
    expect(() => resolveWeightSpec(model.checkpoint.config, 'fp32', { format: 'q8' })).toThrow(WeightSpecError);
    expect(() => resolveWeightSpec(model.checkpoint.config, 'fp32', { format: 'q8' })).toThrow(/GPTQ 4-bit .* served as q4/);
  });
});
