/**
 * A peer's memory follows its share of the model: in child processes, loading the shard
 * for a quarter of the layers of a generated ≥ 200 MB model grows resident memory by at
 * most 0.4× what loading the full model does. Each child (test/memory/load-shard.ts)
 * measures its own RSS around loading the executor and one forward step.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TINY_PRESETS, writeTinyCheckpoint } from '../fixtures/checkpoints.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
const CHILD = path.join(ROOT, 'test/memory/load-shard.ts');
const LAYERS = 8;
const MB = 1024 * 1024;

// 8 layers × (q, o: 768² + k, v: 256×768 + gate, up, down: 3 × 2304×768) F32 ≈ 220 MB (210 MiB).
const SIZE = { hiddenSize: 768, numHeads: 6, numKvHeads: 2, intermediateSize: 2304, numLayers: LAYERS, vocabSize: 512 };

interface ChildReport {
  readonly rssBefore: number;
  readonly rssAfter: number;
  readonly weightsBytes: number;
}

let scratch = '';
let checkpoint = '';

async function loadInChild(start: number, end: number): Promise<ChildReport> {
  const { stdout } = await run(process.execPath, ['--expose-gc', '--import', 'tsx', CHILD, checkpoint, String(start), String(end)], {
    cwd: ROOT,
    env: { ...process.env, MESHNET_HOME: path.join(scratch, 'home') },
    maxBuffer: 1024 * 1024,
  });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as ChildReport;
}

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'meshnet-memory-'));
  checkpoint = path.join(scratch, 'model');
  await writeTinyCheckpoint(checkpoint, { ...TINY_PRESETS.llama, dtype: 'F32', seed: 11, ...SIZE });
});

afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('shard memory', () => {
  it('a quarter of the layers costs at most 0.4× the resident memory of the whole model', async () => {
    const { size } = await stat(path.join(checkpoint, 'model.safetensors'));
    expect(size).toBeGreaterThanOrEqual(200 * MB);

    // One child after the other: both measure only themselves, but they share two cores.
    const quarter = await loadInChild(0, LAYERS / 4);
    const full = await loadInChild(0, LAYERS);
    const growth = (r: ChildReport) => r.rssAfter - r.rssBefore;
    const figure = (label: string, r: ChildReport) =>
      `${label}: weights ${(r.weightsBytes / MB).toFixed(1)} MiB, RSS ${(r.rssBefore / MB).toFixed(1)} → ${(r.rssAfter / MB).toFixed(1)} MiB, growth ${(growth(r) / MB).toFixed(1)} MiB`;
    console.log(
      [
        `checkpoint ${(size / MB).toFixed(1)} MiB`,
        figure(`quarter [0, ${LAYERS / 4})`, quarter),
        figure(`full [0, ${LAYERS})`, full),
        `ratio ${(growth(quarter) / growth(full)).toFixed(3)} (limit 0.4)`,
      ].join('\n'),
    );
    expect(growth(full)).toBeGreaterThan(full.weightsBytes * 0.9); // the weights really are resident
    expect(growth(quarter)).toBeLessThanOrEqual(0.4 * growth(full));
  });
});
