/**
 * The bench's GGUF files, one per checkpoint and type, written once into bench/.cache/gguf
 * and reused: the file name carries the checkpoint's cache key and the writer's version,
 * and a file exists under that name only once it is complete (the writer renames at the end).
 */
import { access, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { openLocalModel } from '../../src/node/local-model.ts';
import { GgmlType } from '../gguf/gguf-format.ts';
import { readGguf } from '../gguf/gguf-reader.ts';
import { ggufWeightBytesPerToken, LLAMA_GGUF_WRITER_VERSION, writeLlamaGguf, type GgufWeights } from '../gguf/llama-gguf.ts';
import { GEMMA3_GGUF_WRITER_VERSION, writeGemma3Gguf } from '../gguf/gemma3-gguf.ts';
import { moeGgufWeightBytesPerToken, QWEN3MOE_GGUF_WRITER_VERSION, writeQwen3MoeGguf } from '../gguf/qwen3moe-gguf.ts';

export interface CachedGguf {
  readonly path: string;
  readonly weights: GgufWeights;
  readonly fileBytes: number;
  readonly weightBytesPerToken: number;
  /** Whether this call wrote it. */
  readonly written: boolean;
  /** Tensors written in another type than asked (rows not whole blocks). */
  readonly fallbacks: readonly string[];
}

export async function cachedGguf(cacheDir: string, name: string, checkpointDir: string, weights: GgufWeights): Promise<CachedGguf> {
  const { key, checkpoint } = await openLocalModel(checkpointDir);
  // Gemma 3 checkpoints as llama.cpp's `gemma3`, Qwen3-MoE as `qwen3moe`, every other one as `llama`.
  const architecture = checkpoint.config.architecture;
  const writer =
    architecture === 'Gemma3ForCausalLM' ? { tag: `g${GEMMA3_GGUF_WRITER_VERSION}`, write: writeGemma3Gguf }
      : architecture === 'Qwen3MoeForCausalLM' ? { tag: `q3m${QWEN3MOE_GGUF_WRITER_VERSION}`, write: writeQwen3MoeGguf }
        : { tag: `w${LLAMA_GGUF_WRITER_VERSION}`, write: writeLlamaGguf };
  const dir = path.join(cacheDir, 'gguf');
  const file = path.join(dir, `${name}-${key}-${writer.tag}-${weights}.gguf`);
  const exists = await access(file).then(() => true, () => false);
  if (!exists) {
    await mkdir(dir, { recursive: true });
    await writer.write(checkpointDir, file, weights, name);
  }
  const gguf = await readGguf(file);
  const fallbacks = gguf.tensors.filter((t) => t.ne.length > 1 && weights !== 'F32' && t.type !== GgmlType[weights] && !t.name.endsWith('ffn_gate_inp.weight')).map((t) => t.name);
  return { path: file, weights, fileBytes: gguf.fileBytes, weightBytesPerToken: checkpoint.config.moe ? moeGgufWeightBytesPerToken(gguf.tensors, checkpoint.config.moe.topK) : ggufWeightBytesPerToken(gguf.tensors), written: !exists, fallbacks };
}
