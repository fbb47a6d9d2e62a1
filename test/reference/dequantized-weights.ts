/**
 * The float weights a part's packed `weights.bin` stands for: what its graph computes with at
 * MatMulNBits accuracy level 0. Quantized tensors are dequantized (permuted GPTQ columns put
 * back in checkpoint order), float ones decoded. Keys are Hugging Face `.weight` names.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { toFloat32 } from '../../src/core/model/dtype.ts';
import { dequantizeRows } from '../../src/core/model/quant/block-quant.ts';
import type { WeightSpec } from '../../src/core/model/quant/weight-format.ts';
import type { ShardManifest, ShardPart } from '../../src/core/model/shard-artifact.ts';
import type { ActivationDtype } from '../../src/core/model/activations.ts';
import type { PackedRegion } from '../../src/core/model/weight-segments.ts';
import { WEIGHTS_FILE } from '../../src/core/model/shard-artifact.ts';
import { getShardArtifact } from '../../src/node/artifact-cache.ts';
import type { LocalModel } from '../../src/node/local-model.ts';
import type { ReferenceWeights } from './forward.ts';

export function dequantizedTensors(manifest: ShardManifest, packed: Uint8Array): Map<string, Float32Array> {
  const slice = (r: PackedRegion) => packed.subarray(r.offset, r.offset + r.length);
  const out = new Map<string, Float32Array>();
  for (const s of manifest.segments) {
    if (s.kind === 'float') {
      out.set(s.name, toFloat32(slice(s.out), s.target));
      continue;
    }
    const q = { data: slice(s.out.data), scales: slice(s.out.scales), ...(s.out.zeroPoints ? { zeroPoints: slice(s.out.zeroPoints) } : {}) };
    const w = dequantizeRows(q, s.layout); // [N, K] in the order the op reads
    if (s.kind === 'quantize') {
      out.set(s.name, w);
      continue;
    }
    const { rows: N, cols: K } = s.layout;
    if (s.out.permutation) {
      const perm = new BigInt64Array(slice(s.out.permutation).slice().buffer);
      const original = new Float32Array(N * K);
      for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) original[n * K + Number(perm[k])] = w[n * K + k];
      out.set(`${s.name}.weight`, original);
    } else out.set(`${s.name}.weight`, w);
  }
  return out;
}

async function partTensors(model: LocalModel, part: ShardPart, dtype: ActivationDtype, weights: WeightSpec): Promise<Map<string, Float32Array>> {
  const { artifact, directory } = await getShardArtifact(model.checkpoint, model.key, part, dtype, weights);
  return dequantizedTensors(artifact.manifest, new Uint8Array(await readFile(path.join(directory, WEIGHTS_FILE))));
}

/**
 * Reference weights for the whole model in `weights` (artifacts built in MESHNET_HOME): the
 * layers' and the head's as their artifacts hold them; a tied model's LM head comes from the
 * head artifact as 'lm_head.weight' (each graph quantizes the shared table in its own layout).
 */
export async function dequantizedReference(model: LocalModel, dtype: ActivationDtype, weights: WeightSpec): Promise<ReferenceWeights> {
  const { config } = model.checkpoint;
  const prefix = config.tensorPrefix ?? 'model.';
  const tensors = await partTensors(model, { kind: 'layers', range: { start: 0, end: config.numLayers } }, dtype, weights);
  for (const [name, t] of await partTensors(model, { kind: 'embedding' }, dtype, weights)) tensors.set(name, t);
  for (const [name, t] of await partTensors(model, { kind: 'head' }, dtype, weights)) {
    tensors.set(name === `${prefix}embed_tokens.weight` ? `${prefix.slice(0, -'model.'.length)}lm_head.weight` : name, t);
  }
  return {
    get(name) {
      const t = tensors.get(name);
      if (!t) throw new Error(`no tensor ${name}`);
      return t;
    },
    has: (name) => tensors.has(name),
  };
}
