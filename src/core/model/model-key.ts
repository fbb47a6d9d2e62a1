/**
 * A model's cache key: a hash of its config and of every tensor's name, dtype, shape, file
 * and byte range. Two folders with the same checkpoint share artifacts; a changed file
 * gets a new key. (Metadata only: weights are not hashed, so a weight edited in place with
 * the same layout is not noticed; checkpoints are treated as immutable.)
 */
import type { Checkpoint } from './checkpoint.ts';

/** 64-bit FNV-1a over a string, as 16 hex digits. */
export function fnv1a64(text: string): string {
  let hash = 0xcbf29ce484222325n;
  const prime = 0x100000001b3n;
  const bytes = new TextEncoder().encode(text);
  for (const byte of bytes) {
    hash ^= BigInt(byte);
    hash = (hash * prime) & 0xffffffffffffffffn;
  }
  return hash.toString(16).padStart(16, '0');
}

/**
 * Bumped when the graphs built for the same checkpoint change meaning, so cached artifacts of
 * an older builder are not reused (2: sliding windows and Gemma/Phi-3 parts in the graphs; 3: windowed layers read `seqlens_k_window`;
 * 4: MoE experts behind If nodes, run only when a token chose them, and split sizes shared across layers — a cached artifact of
 * format 3 would still answer the same, but keep the slower graph until the cache was emptied).
 */
export const GRAPH_FORMAT = 4;

export function modelKey(checkpoint: Pick<Checkpoint, 'config' | 'tensors' | 'files'>): string {
  const parts: string[] = [`graph-format ${GRAPH_FORMAT}`, JSON.stringify(checkpoint.config)];
  for (const file of checkpoint.files) parts.push(`${file.name}:${file.size}:${file.dataOffset}`);
  const names = [...checkpoint.tensors.keys()].sort();
  for (const name of names) {
    const t = checkpoint.tensors.get(name)!;
    parts.push(`${name}:${t.dtype}:${t.shape.join('x')}:${t.file}:${t.offset}:${t.length}`);
  }
  return fnv1a64(parts.join('\n'));
}
