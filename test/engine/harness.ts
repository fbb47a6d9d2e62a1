/** Shared helpers for engine tests: temp folders, fixture models, reference weights, step runners. */
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Checkpoint } from '../../src/core/model/checkpoint.ts';
import type { ActivationDtype } from '../../src/core/model/activations.ts';
import type { WeightSpec } from '../../src/core/model/quant/weight-format.ts';
import type { LayerRange } from '../../src/core/model/types.ts';
import type { Activations } from '../../src/core/runtime/shard-executor.ts';
import { loadLocalPipeline, openLocalModel, type LoadedPipeline, type LocalModel } from '../../src/node/local-model.ts';
import { writeTinyCheckpoint, type TinyCheckpointOptions } from '../fixtures/checkpoints.ts';
import type { ReferenceWeights } from '../reference/forward.ts';

export const STORIES_DIR = path.resolve(import.meta.dirname, '../fixtures/models/stories260k');
export const STORIES_GOLDEN = [
  461, 461, 401, 401, 401, 461, 378, 455, 473, 456, 435, 299, 362, 409, 283, 264, 283, 452, 288, 13, 431, 431, 431, 431, 431,
  431, 431, 431, 431, 431, 431, 431,
];

export const AIDREAMS_DIR = path.resolve(import.meta.dirname, '../fixtures/models/aidreams260k');

/**
 * The golden data of aidreams260k (the demo model), read from its README in test/fixtures: the
 * first 64 greedy ids after BOS of llama2.c's run.c, and the text they decode to.
 */
export function aidreamsGolden(): { ids: number[]; text: string } {
  const readme = readFileSync(path.join(AIDREAMS_DIR, 'README.md'), 'utf8');
  const golden = readme.slice(readme.indexOf('## Golden data'));
  const blocks = [...golden.matchAll(/```\n([\s\S]*?)\n```/g)].map((m) => m[1]!);
  const ids = JSON.parse(blocks[0]!) as number[];
  if (ids.length !== 64 || !blocks[1]?.startsWith('"Echoes of')) throw new Error('aidreams260k README: golden data not where expected');
  return { ids, text: blocks[1] };
}

export async function tempDir(prefix: string): Promise<{ dir: string; remove: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `meshnet-${prefix}-`));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

export async function fixtureModel(root: string, name: string, options: TinyCheckpointOptions): Promise<LocalModel> {
  const dir = path.join(root, name);
  await writeTinyCheckpoint(dir, options);
  return openLocalModel(dir);
}

/** A fixture model from ready-made checkpoint files (e.g. buildGemmaCheckpointFiles). */
export async function fixtureModelFromFiles(root: string, name: string, files: Map<string, Uint8Array | string>): Promise<LocalModel> {
  const dir = path.join(root, name);
  await mkdir(dir, { recursive: true });
  for (const [file, content] of files) await writeFile(path.join(dir, file), content);
  return openLocalModel(dir);
}

/** Every tensor of the checkpoint as float32, for the reference forward pass. */
export async function referenceWeights(checkpoint: Checkpoint): Promise<ReferenceWeights> {
  const tensors = new Map<string, Float32Array>();
  for (const name of checkpoint.tensors.keys()) tensors.set(name, await checkpoint.readTensor(name));
  return {
    get(name) {
      const t = tensors.get(name);
      if (!t) throw new Error(`no tensor ${name}`);
      return t;
    },
  };
}

export function pipeline(model: LocalModel, ranges: LayerRange[], device = 'cpu', dtype: ActivationDtype = 'fp32', weights?: WeightSpec): Promise<LoadedPipeline> {
  return loadLocalPipeline(model, { ranges, device, dtype, weights, threads: 1 });
}

/**
 * Feed `ids` starting at `position` through every stage of `p` for session `sessionId` and
 * return the last position's logits.
 */
export async function stepLogits(p: LoadedPipeline, sessionId: string, ids: number[], position: number): Promise<Float32Array> {
  let hidden: Activations = await p.head.embed(ids);
  for (const stage of p.stages) {
    const kv = stage.kv.acquire(sessionId, stage.executor.range);
    hidden = await stage.executor.run({ sessionId, startPosition: position, hidden }, kv);
  }
  return p.head.logits(hidden);
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i] - b[i]));
  return max;
}

export function argmax(values: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}
