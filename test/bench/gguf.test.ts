/**
 * The bench's GGUF writer (bench/gguf), checked without llama.cpp: ggml's block layouts
 * pinned on hand-worked blocks, the quantizers' error within each format's bound, the q/k
 * row permutation shown to turn HF's rotate-half rotary into llama.cpp's interleaved one,
 * and written files read back — metadata, tensor names, shapes, types, offsets, alignment
 * and data — on tied and untied fixtures in F32, Q8_0 and Q4_0; and the gemma3 writer (names,
 * metadata, norms shifted by +1) and the qwen3moe writer (stacked experts, router F32). (`npm run bench:llama-check`
 * runs the files in llama.cpp itself and compares tokens and logits with meshnet.)
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ropeInverseFrequencies } from '../../src/core/model/rope.ts';
import { decodeGgml, dequantizeQ4_0, dequantizeQ8_0, quantizeQ4_0, quantizeQ8_0 } from '../../bench/gguf/ggml-quantize.ts';
import { GgmlType, GgufValueType } from '../../bench/gguf/gguf-format.ts';
import { GgufFormatError, readGguf } from '../../bench/gguf/gguf-reader.ts';
import { llamaCppTensorName, permuteRotaryRows, writeLlamaGguf, type GgufWeights } from '../../bench/gguf/llama-gguf.ts';
import { mulberry32 } from '../fixtures/checkpoints.ts';
import { buildGemmaCheckpointFiles } from '../fixtures/gemma-checkpoints.ts';
import { gemma3TensorName, writeGemma3Gguf } from '../../bench/gguf/gemma3-gguf.ts';
import { qwen3MoeTensorName, writeQwen3MoeGguf } from '../../bench/gguf/qwen3moe-gguf.ts';
import { tinyMoeCheckpoint } from '../fixtures/moe-checkpoints.ts';
import { openLocalModel } from '../../src/node/local-model.ts';
import { fixtureModel, tempDir } from '../engine/harness.ts';
import type { LocalModel } from '../../src/node/local-model.ts';

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

describe('ggml block layouts', () => {
  it('Q8_0: f16 scale max|x|/127, then int8 rounded half away from zero', () => {
    const x = new Float32Array(32);
    x.set([-127, 0.5, -0.5, 1.5, 2.5, -2.5, 126.4]);
    const block = quantizeQ8_0(x);
    expect(block.byteLength).toBe(34);
    expect(hex(block.subarray(0, 2))).toBe('003c'); // d = 1.0
    expect([...new Int8Array(block.buffer, 2, 7)]).toEqual([-127, 1, -1, 2, 3, -3, 126]);
    expect([...dequantizeQ8_0(block).subarray(0, 7)]).toEqual([-127, 1, -1, 2, 3, -3, 126]);
  });

  it('Q4_0: d = (value of largest magnitude)/−8, value j in the low nibble of byte j, value j+16 in its high nibble', () => {
    const x = Float32Array.from({ length: 32 }, (_, j) => j - 16); // max magnitude −16 → d = 2
    const block = quantizeQ4_0(x);
    expect(block.byteLength).toBe(18);
    expect(hex(block.subarray(0, 2))).toBe('0040'); // d = 2.0
    expect(hex(block.subarray(2))).toBe('809191a2a2b3b3c4c4d5d5e6e6f7f7f8');
    const back = dequantizeQ4_0(block);
    expect(back[0]).toBe(-16);
    expect(back[31]).toBe(14); // +15 clamps to nibble 15: (15 − 8)·2
  });

  it('dequantized blocks stay within each format’s error of the source', () => {
    const random = mulberry32(12);
    const x = Float32Array.from({ length: 32 * 64 }, (_, i) => (random() - 0.5) * (1 + (i % 7)) * (i % 97 === 0 ? 40 : 1));
    const q8 = dequantizeQ8_0(quantizeQ8_0(x));
    const q4 = dequantizeQ4_0(quantizeQ4_0(x));
    for (let b = 0; b < 64; b++) {
      const block = x.subarray(b * 32, b * 32 + 32);
      const amax = Math.max(...block.map(Math.abs));
      for (let j = 0; j < 32; j++) {
        const i = b * 32 + j;
        // Q8_0: half a step (amax/127), plus the f16 rounding of the scale (2^-11 relative, ×127).
        expect(Math.abs(q8[i] - x[i])).toBeLessThanOrEqual((amax / 127) * (0.5 + 127 * 2 ** -11) + 1e-7);
        // Q4_0: half a step (amax/8), but the value opposite the largest clamps to 7 steps: one whole step.
        expect(Math.abs(q4[i] - x[i])).toBeLessThanOrEqual((amax / 8) * (1 + 8 * 2 ** -11) + 1e-7);
      }
    }
    // And they are far from exact on average, as 8 and 4 bits are: the bounds are not vacuous.
    const rms = (a: Float32Array) => Math.sqrt(a.reduce((s, v, i) => s + (v - x[i]) ** 2, 0) / a.length);
    expect(rms(q4)).toBeGreaterThan(rms(q8) * 4);
  });

  it('refuses rows that are not whole blocks', () => {
    expect(() => quantizeQ8_0(new Float32Array(40))).toThrow(/whole blocks of 32/);
    expect(() => quantizeQ4_0(new Float32Array(172))).toThrow(/whole blocks of 32/);
  });
});

describe('q/k row permutation', () => {
  it('moves HF row h·D + s·D/2 + i to row h·D + 2i + s', () => {
    const w = Float32Array.from({ length: 8 }, (_, i) => i); // 2 heads of 4 rows, 1 column
    expect([...permuteRotaryRows(w, 8, 1, 2)]).toEqual([0, 2, 1, 3, 4, 6, 5, 7]);
  });

  it('makes llama.cpp’s interleaved rotary of the permuted projection equal HF’s rotate-half of the original', () => {
    const heads = 3;
    const headDim = 8;
    const cols = 5;
    const random = mulberry32(3);
    const w = Float32Array.from({ length: heads * headDim * cols }, () => random() - 0.5);
    const x = Float32Array.from({ length: cols }, () => random() - 0.5);
    const invFreq = ropeInverseFrequencies({ theta: 10000 }, headDim);
    const project = (m: Float32Array) => Float32Array.from({ length: heads * headDim }, (_, r) => x.reduce((s, v, c) => s + v * m[r * cols + c], 0));
    const position = 7;
    const hf = project(w);
    const gguf = project(permuteRotaryRows(w, heads * headDim, cols, heads));
    const half = headDim / 2;
    const rotatedHf = new Float32Array(hf.length);
    const rotatedGguf = new Float32Array(gguf.length);
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < half; i++) {
        const angle = position * invFreq[i];
        const [c, s] = [Math.cos(angle), Math.sin(angle)];
        // HF: pairs (i, i + D/2).
        const [a, b] = [hf[h * headDim + i], hf[h * headDim + half + i]];
        rotatedHf[h * headDim + i] = a * c - b * s;
        rotatedHf[h * headDim + half + i] = b * c + a * s;
        // llama.cpp (ggml rope mode 0): adjacent pairs (2i, 2i + 1).
        const [p, q] = [gguf[h * headDim + 2 * i], gguf[h * headDim + 2 * i + 1]];
        rotatedGguf[h * headDim + 2 * i] = p * c - q * s;
        rotatedGguf[h * headDim + 2 * i + 1] = q * c + p * s;
      }
    }
    // Attention only sees dot products of q and k: the same permutation on both keeps them.
    const permutedBack = permuteRotaryRows(rotatedHf, heads * headDim, 1, heads);
    for (let i = 0; i < permutedBack.length; i++) expect(rotatedGguf[i]).toBeCloseTo(permutedBack[i], 6);
  });
});

describe('writeLlamaGguf', () => {
  let temp: Awaited<ReturnType<typeof tempDir>>;
  let tied: LocalModel;
  let untied: LocalModel;

  beforeAll(async () => {
    temp = await tempDir('gguf');
    // intermediate 40: down_proj rows are not whole blocks (like aidreams260k's 172).
    tied = await fixtureModel(temp.dir, 'tied', { architecture: 'LlamaForCausalLM', dtype: 'F32', tied: true, seed: 5, numLayers: 2, intermediateSize: 40 });
    untied = await fixtureModel(temp.dir, 'untied', { architecture: 'LlamaForCausalLM', dtype: 'F16', tied: false, seed: 6, numLayers: 2, numKvHeads: 4 });
  });
  afterAll(async () => temp?.remove());

  const cases: [string, () => LocalModel, GgufWeights][] = [
    ['tied F32', () => tied, 'F32'],
    ['tied Q8_0', () => tied, 'Q8_0'],
    ['untied Q4_0', () => untied, 'Q4_0'],
    ['untied Q8_0', () => untied, 'Q8_0'],
  ];
  for (const [label, model, weights] of cases) {
    it(`${label}: metadata, tensors, alignment and data read back`, async () => {
      const { checkpoint, directory } = model();
      const config = checkpoint.config;
      const out = path.join(temp.dir, `${label.replace(' ', '-')}.gguf`);
      const summary = await writeLlamaGguf(directory, out, weights);
      const file = await readGguf(out);
      expect(file.version).toBe(3);
      const meta = Object.fromEntries(file.metadata);
      expect(meta).toMatchObject({
        'general.architecture': 'llama',
        'general.alignment': 32,
        'general.file_type': { F32: 0, F16: 1, Q4_0: 2, Q8_0: 7 }[weights],
        'llama.block_count': config.numLayers,
        'llama.context_length': config.maxPositionEmbeddings,
        'llama.embedding_length': config.hiddenSize,
        'llama.feed_forward_length': config.intermediateSize,
        'llama.attention.head_count': config.numHeads,
        'llama.attention.head_count_kv': config.numKvHeads,
        'llama.rope.dimension_count': config.headDim,
        'llama.rope.freq_base': config.rope.theta,
        'tokenizer.ggml.model': 'gpt2', // the fixtures' WordLevel vocabulary
        'tokenizer.ggml.bos_token_id': 1,
        'tokenizer.ggml.eos_token_id': 2,
      });
      expect(meta['llama.attention.layer_norm_rms_epsilon']).toBeCloseTo(config.rmsNormEps, 10);
      expect(file.metadataTypes.get('llama.rope.freq_base')?.type).toBe(GgufValueType.FLOAT32);
      const tokens = meta['tokenizer.ggml.tokens'] as string[];
      expect(tokens).toHaveLength(config.vocabSize);
      expect(tokens.slice(0, 4)).toEqual(['<unk>', '<s>', '</s>', 't3']);
      expect((meta['tokenizer.ggml.token_type'] as number[]).slice(0, 4)).toEqual([2, 3, 3, 1]);

      // Tensor names: llama.cpp's, every layer, output.weight only when untied.
      const names = file.tensors.map((t) => t.name);
      const expected = ['token_embd.weight', 'output_norm.weight', ...(config.tieWordEmbeddings ? [] : ['output.weight'])];
      for (let l = 0; l < config.numLayers; l++) {
        for (const part of ['attn_norm', 'attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_norm', 'ffn_gate', 'ffn_up', 'ffn_down']) expected.push(`blk.${l}.${part}.weight`);
      }
      expect([...names].sort()).toEqual([...expected].sort());

      // Layout: the data section and every tensor aligned, in order, no gaps beyond padding.
      expect(file.dataOffset % 32).toBe(0);
      let end = 0;
      for (const t of file.tensors) {
        expect(t.offset % 32).toBe(0);
        expect(t.offset).toBe(Math.ceil(end / 32) * 32);
        end = t.offset + t.bytes;
      }
      expect(file.fileBytes).toBe(file.dataOffset + Math.ceil(end / 32) * 32);
      expect(summary.fileBytes).toBe(file.fileBytes);

      // Every tensor: ne is the HF shape reversed; norms F32; weights in the asked type
      // (F16 when rows are not whole blocks); data equal to the (q/k-permuted) source.
      for (const [hf, location] of checkpoint.tensors) {
        const name = llamaCppTensorName(hf)!;
        if (hf === 'lm_head.weight' && config.tieWordEmbeddings) continue;
        const info = file.tensors.find((t) => t.name === name)!;
        expect(info.ne, name).toEqual([...location.shape].reverse());
        const wholeBlocks = info.ne[0] % 32 === 0;
        const type = info.ne.length === 1 || weights === 'F32' ? GgmlType.F32 : wholeBlocks ? GgmlType[weights] : GgmlType.F16;
        expect(GgmlType[info.type], name).toBe(GgmlType[type]);
        let source = await checkpoint.readTensor(hf);
        if (name.endsWith('attn_q.weight')) source = permuteRotaryRows(source, location.shape[0], location.shape[1], config.numHeads);
        if (name.endsWith('attn_k.weight')) source = permuteRotaryRows(source, location.shape[0], location.shape[1], config.numKvHeads);
        const back = decodeGgml(await file.readTensor(name), info.type);
        expect(back.length).toBe(source.length);
        let worst = 0;
        for (let b = 0; b < source.length / info.ne[0]; b++) {
          // Per block of 32 (or per row for F32/F16): error relative to the block's largest magnitude.
          for (let s = 0; s < info.ne[0]; s += 32) {
            const from = b * info.ne[0] + s;
            const block = source.subarray(from, from + Math.min(32, info.ne[0] - s));
            const amax = Math.max(...block.map(Math.abs)) || 1;
            for (let j = 0; j < block.length; j++) worst = Math.max(worst, Math.abs(back[from + j] - block[j]) / amax);
          }
        }
        const bound = { [GgmlType.F32]: 0, [GgmlType.F16]: 2 ** -11, [GgmlType.Q8_0]: 0.5 / 127 + 2 ** -11, [GgmlType.Q4_0]: 1 / 8 + 2 ** -10 }[info.type];
        expect(worst, name).toBeLessThanOrEqual(bound);
      }
      if (config.intermediateSize % 32 !== 0 && weights !== 'F32') expect(summary.fallbacks).toHaveLength(config.numLayers);
    });
  }

  it('refuses what the writer does not handle, naming it', async () => {
    const qwen = await fixtureModel(temp.dir, 'qwen2', { architecture: 'Qwen2ForCausalLM', dtype: 'F32', tied: true, seed: 1, numLayers: 1 });
    await expect(writeLlamaGguf(qwen.directory, path.join(temp.dir, 'q.gguf'), 'F32')).rejects.toThrow(/plain LlamaForCausalLM.*Qwen2ForCausalLM/);
  });
});

describe('readGguf', () => {
  let temp: Awaited<ReturnType<typeof tempDir>>;
  let good: Uint8Array;
  beforeAll(async () => {
    temp = await tempDir('gguf-read');
    const model = await fixtureModel(temp.dir, 'm', { architecture: 'LlamaForCausalLM', dtype: 'F32', tied: true, seed: 2, numLayers: 1 });
    await writeLlamaGguf(model.directory, path.join(temp.dir, 'good.gguf'), 'Q8_0');
    good = await readFile(path.join(temp.dir, 'good.gguf'));
  });
  afterAll(async () => temp?.remove());

  const bad = async (name: string, bytes: Uint8Array) => {
    const file = path.join(temp.dir, name);
    await writeFile(file, bytes);
    return readGguf(file);
  };

  it('refuses a file that is not GGUF, another version, a truncated header or truncated data', async () => {
    await expect(bad('magic.gguf', Uint8Array.from([1, 2, 3, 4, ...good.subarray(4)]))).rejects.toThrow(GgufFormatError);
    const v2 = Uint8Array.from(good);
    v2[4] = 2;
    await expect(bad('v2.gguf', v2)).rejects.toThrow(/version 2/);
    await expect(bad('header.gguf', good.subarray(0, 200))).rejects.toThrow(/past the end/);
    await expect(bad('data.gguf', good.subarray(0, good.byteLength - 100))).rejects.toThrow(/ends past the end of the file/);
  });
});

describe('writeGemma3Gguf', () => {
  let temp: Awaited<ReturnType<typeof tempDir>>;
  beforeAll(async () => {
    temp = await tempDir('gguf-gemma3');
  });
  afterAll(async () => temp?.remove());

  it("a Gemma3ForCausalLM checkpoint as llama.cpp's gemma3: metadata, gguf-py names, norms shifted by +1, no q/k permutation", async () => {
    const dir = path.join(temp.dir, 'gemma3');
    await mkdir(dir, { recursive: true });
    for (const [file, content] of buildGemmaCheckpointFiles({ version: 3, dtype: 'F32', tied: true, seed: 9, numLayers: 2, slidingWindow: 4 })) await writeFile(path.join(dir, file), content);
    const { checkpoint } = await openLocalModel(dir);
    const config = checkpoint.config;
    const out = path.join(temp.dir, 'gemma3.gguf');
    await writeGemma3Gguf(dir, out, 'F32');
    const file = await readGguf(out);
    const meta = Object.fromEntries(file.metadata);
    expect(meta).toMatchObject({
      'general.architecture': 'gemma3',
      'gemma3.block_count': 2,
      'gemma3.embedding_length': config.hiddenSize,
      'gemma3.attention.head_count': config.numHeads,
      'gemma3.attention.head_count_kv': config.numKvHeads,
      'gemma3.attention.key_length': config.headDim, // 32, not hidden / heads (16)
      'gemma3.attention.sliding_window': 4,
      'gemma3.rope.freq_base': config.rope.theta,
    });
    const expected = ['token_embd.weight', 'output_norm.weight'];
    const parts = ['attn_norm', 'attn_q', 'attn_k', 'attn_v', 'attn_output', 'attn_q_norm', 'attn_k_norm', 'post_attention_norm', 'ffn_norm', 'post_ffw_norm', 'ffn_gate', 'ffn_up', 'ffn_down'];
    for (let l = 0; l < 2; l++) for (const part of parts) expected.push(`blk.${l}.${part}.weight`);
    expect(file.tensors.map((t) => t.name).sort()).toEqual(expected.sort());
    for (const [hf] of checkpoint.tensors) {
      const name = gemma3TensorName(hf)!;
      const source = await checkpoint.readTensor(hf);
      const back = decodeGgml(await file.readTensor(name), file.tensors.find((t) => t.name === name)!.type);
      const shift = hf.endsWith('norm.weight') ? 1 : 0; // q/k norms too: Gemma3RMSNorm is (1 + w) there as well
      expect(back.every((v, i) => v === Math.fround(source[i] + shift)), name).toBe(true);
    }
    await expect(writeGemma3Gguf(path.resolve(import.meta.dirname, '../fixtures/models/stories260k'), path.join(temp.dir, 'x.gguf'), 'F32')).rejects.toThrow(/Gemma3ForCausalLM.*LlamaForCausalLM/);
  });
});

describe('writeQwen3MoeGguf', () => {
  let temp: Awaited<ReturnType<typeof tempDir>>;
  beforeAll(async () => {
    temp = await tempDir('gguf-qwen3moe');
  });
  afterAll(async () => temp?.remove());

  it("a Qwen3MoeForCausalLM checkpoint as llama.cpp's qwen3moe: expert metadata, experts stacked into 3-D tensors, router F32, q/k norms", async () => {
    const E = 4;
    const I = 64;
    const model = await fixtureModel(temp.dir, 'q3m', tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'F32', seed: 5, numExperts: E, topK: 2, expertSize: I, numLayers: 2, tied: true }));
    const config = model.checkpoint.config;
    const H = config.hiddenSize;
    const out = path.join(temp.dir, 'q3m.gguf');
    const summary = await writeQwen3MoeGguf(model.directory, out, 'Q8_0');
    const file = await readGguf(out);
    expect(Object.fromEntries(file.metadata)).toMatchObject({
      'general.architecture': 'qwen3moe',
      'qwen3moe.block_count': 2,
      'qwen3moe.expert_count': E,
      'qwen3moe.expert_used_count': 2,
      'qwen3moe.expert_feed_forward_length': I,
      'qwen3moe.attention.key_length': config.headDim,
      'qwen3moe.rope.freq_base': config.rope.theta,
    });
    const expected = ['token_embd.weight', 'output_norm.weight'];
    const parts = ['attn_norm', 'attn_q', 'attn_k', 'attn_v', 'attn_output', 'attn_q_norm', 'attn_k_norm', 'ffn_norm', 'ffn_gate_inp', 'ffn_gate_exps', 'ffn_up_exps', 'ffn_down_exps'];
    for (let l = 0; l < 2; l++) for (const part of parts) expected.push(`blk.${l}.${part}.weight`);
    expect(file.tensors.map((t) => t.name).sort()).toEqual(expected.sort());
    const info = (name: string) => file.tensors.find((t) => t.name === name)!;
    expect(info('blk.1.ffn_gate_exps.weight')).toMatchObject({ ne: [H, I, E], type: GgmlType.Q8_0 });
    expect(info('blk.1.ffn_down_exps.weight')).toMatchObject({ ne: [I, H, E], type: GgmlType.Q8_0 });
    expect(info('blk.1.ffn_gate_inp.weight')).toMatchObject({ ne: [H, E], type: GgmlType.F32 });
    expect(info('blk.0.attn_q_norm.weight')).toMatchObject({ ne: [config.headDim], type: GgmlType.F32 });
    // Expert e of a stacked tensor is the e-th slab: its bytes decode to that expert's matrix.
    const down = decodeGgml(await file.readTensor('blk.1.ffn_down_exps.weight'), GgmlType.Q8_0);
    for (let e = 0; e < E; e++) {
      const source = await model.checkpoint.readTensor(`model.layers.1.mlp.experts.${e}.down_proj.weight`);
      const slab = down.subarray(e * H * I, (e + 1) * H * I);
      expect(slab).toEqual(dequantizeQ8_0(quantizeQ8_0(source)));
    }
    const router = decodeGgml(await file.readTensor('blk.0.ffn_gate_inp.weight'), GgmlType.F32);
    expect(router).toEqual(await model.checkpoint.readTensor('model.layers.0.mlp.gate.weight'));
    // Per token: everything but the experts, plus top-k of E experts of each stacked tensor (tied: the whole embedding table).
    const experts = file.tensors.filter((t) => t.name.endsWith('_exps.weight')).reduce((s, t) => s + t.bytes, 0);
    const all = file.tensors.reduce((s, t) => s + t.bytes, 0);
    expect(summary.weightBytesPerToken).toBe(all - experts + (experts * 2) / E);
    expect(qwen3MoeTensorName('model.layers.3.self_attn.k_norm.weight')).toBe('blk.3.attn_k_norm.weight');

    const unnormalized = await fixtureModel(temp.dir, 'q3m-nonorm', tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'F32', seed: 5, numLayers: 1, normTopK: false }));
    await expect(writeQwen3MoeGguf(unnormalized.directory, path.join(temp.dir, 'x.gguf'), 'F32')).rejects.toThrow(/norm_topk_prob false/);
    const dense = await fixtureModel(temp.dir, 'q3m-dense', tinyMoeCheckpoint({ architecture: 'Qwen3MoeForCausalLM', dtype: 'F32', seed: 5, numLayers: 2, mlpOnlyLayers: [0] }));
    await expect(writeQwen3MoeGguf(dense.directory, path.join(temp.dir, 'y.gguf'), 'F32')).rejects.toThrow(/dense layers/);
  });
});
