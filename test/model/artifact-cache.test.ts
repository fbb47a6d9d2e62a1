/**
 * The artifact cache per format and block size: a build that fails part-way leaves nothing
 * in the cache, a folder left by a killed build is swept by the next build of that part,
 * and a cached artifact is read, not rebuilt.
 */
import { mkdir, readdir, readFile, stat, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { weightSpec } from '../../src/core/model/quant/weight-format.ts';
import { getShardArtifact } from '../../src/node/artifact-cache.ts';
import { openLocalModel } from '../../src/node/local-model.ts';
import { TINY_PRESETS, writeTinyCheckpoint } from '../fixtures/checkpoints.ts';
import { tempDir } from '../engine/harness.ts';

const Q4 = weightSpec('fp32', { format: 'q4' });
const LAYERS = { kind: 'layers', range: { start: 0, end: 4 } } as const;

let root: { dir: string; remove: () => Promise<void> };
beforeAll(async () => {
  root = await tempDir('artifact-cache');
});
afterAll(() => root.remove());

async function fixture(name: string): Promise<string> {
  const dir = path.join(root.dir, name);
  await writeTinyCheckpoint(dir, { ...TINY_PRESETS.llama, dtype: 'F32', seed: 61 });
  return dir;
}

describe('artifact cache', () => {
  it('a q4 build that fails part-way leaves no folder behind, and the next one works', async () => {
    const dir = await fixture('broken');
    const home = path.join(root.dir, 'home-broken');
    const model = await openLocalModel(dir);
    // The header still lists every tensor, but the data ends early: packing fails on a late layer.
    const file = path.join(dir, 'model.safetensors');
    const { size } = await stat(file);
    const intact = await readFile(file);
    await truncate(file, size - 4096);
    const error = await getShardArtifact(model.checkpoint, model.key, LAYERS, 'fp32', Q4, home).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    const parent = path.join(home, 'artifacts', model.key);
    expect(await readdir(parent)).toEqual([]); // no artifact, no temporary folder

    await writeFile(file, intact);
    const built = await getShardArtifact(model.checkpoint, model.key, LAYERS, 'fp32', Q4, home);
    expect(built.cached).toBe(false);
    expect(await readdir(parent)).toEqual(['layers-0-4-fp32-q4-b32-acc4']);
    const again = await getShardArtifact(model.checkpoint, model.key, LAYERS, 'fp32', Q4, home);
    expect(again.cached).toBe(true);
  });

  it('sweeps the temporary folder of a build whose process is gone, keeps a live one', async () => {
    const dir = await fixture('swept');
    const home = path.join(root.dir, 'home-swept');
    const model = await openLocalModel(dir);
    const parent = path.join(home, 'artifacts', model.key);
    const part = 'layers-0-4-fp32-q4-b32-acc4';
    const dead = path.join(parent, `.building-${part}-2147483646-0000`); // no such pid
    const alive = path.join(parent, `.building-${part}-${process.ppid}-0000`); // our parent: running
    for (const folder of [dead, alive]) {
      await mkdir(folder, { recursive: true });
      await writeFile(path.join(folder, 'weights.bin'), 'half');
    }
    await getShardArtifact(model.checkpoint, model.key, LAYERS, 'fp32', Q4, home);
    expect((await readdir(parent)).sort()).toEqual([path.basename(alive), part].sort());
  });

  it('one folder per format and block size', async () => {
    const dir = await fixture('formats');
    const home = path.join(root.dir, 'home-formats');
    const model = await openLocalModel(dir);
    for (const spec of [weightSpec('fp32'), weightSpec('fp32', { format: 'fp16' }), weightSpec('fp32', { format: 'q8' }), Q4, weightSpec('fp32', { format: 'q4', blockSize: 64 })]) {
      await getShardArtifact(model.checkpoint, model.key, LAYERS, 'fp32', spec, home);
    }
    expect((await readdir(path.join(home, 'artifacts', model.key))).sort()).toEqual(
      ['layers-0-4-fp32-fp16', 'layers-0-4-fp32-fp32', 'layers-0-4-fp32-q4-b32-acc4', 'layers-0-4-fp32-q4-b64-acc4', 'layers-0-4-fp32-q8-b32-acc4'].sort(),
    );
  });
});
