/**
 * A peer's memory follows its share of the model and its weight format: in child processes,
 * loading the shard for a quarter of the layers of a generated ≥ 200 MB model grows resident
 * memory by at most 0.4× what loading the full model does; the full model in q4 grows it by
 * at most 1.1× its packed q4 bytes + 50 MiB (no fp32 copy, no second copy of the 4-bit
 * values); and building that q4 artifact streams: the build's peak stays far below the fp32
 * model. Each child (test/memory/load-shard.ts, build-artifact.ts) measures only itself.
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
const BUILD_CHILD = path.join(ROOT, 'test/memory/build-artifact.ts');
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

async function child<T>(script: string, args: string[]): Promise<T> {
  const { stdout } = await run(process.execPath, ['--expose-gc', '--import', 'tsx', script, checkpoint, ...args], {
    cwd: ROOT,
    env: { ...process.env, MESHNET_HOME: path.join(scratch, 'home') },
    maxBuffer: 1024 * 1024,
  });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as T;
}
const loadInChild = (start: number, end: number, weights = 'fp32') => child<ChildReport>(CHILD, [String(start), String(end), weights]);
const growth = (r: ChildReport) => r.rssAfter - r.rssBefore;
const figure = (label: string, r: ChildReport) =>
  `${label}: weights ${(r.weightsBytes / MB).toFixed(1)} MiB, RSS ${(r.rssBefore / MB).toFixed(1)} → ${(r.rssAfter / MB).toFixed(1)} MiB, growth ${(growth(r) / MB).toFixed(1)} MiB`;
let full: ChildReport | undefined;

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
    full = await loadInChild(0, LAYERS);
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

  // onnxruntime's CPU kernel repacks the 4-bit values with per-block sums and a copy of the
  // scales for its int8 path (about 0.25 bytes per weight at block 32): that, not a second
  // copy of the values or an fp32 one, is what RSS holds beyond the packed bytes.
  it('q4: the full model grows RSS by at most 1.1× its packed q4 bytes + 50 MiB, a fraction of fp32', async () => {
    const q4 = await loadInChild(0, LAYERS, 'q4-b32-acc4');
    const fp32 = full ?? (await loadInChild(0, LAYERS));
    console.log([figure(`q4 full [0, ${LAYERS})`, q4), figure(`fp32 full [0, ${LAYERS})`, fp32), `q4 ÷ fp32 growth ${(growth(q4) / growth(fp32)).toFixed(3)}`].join('\n'));
    expect(q4.weightsBytes).toBeLessThan(0.17 * fp32.weightsBytes); // 4 bits + a scale and a zero point per 32
    expect(growth(q4)).toBeGreaterThan(0.9 * q4.weightsBytes); // its weights really are resident
    expect(growth(q4)).toBeLessThanOrEqual(1.1 * q4.weightsBytes + 50 * MB);
    expect(growth(q4)).toBeLessThanOrEqual(0.4 * growth(fp32));
  });

  // The build holds one 4 MiB chunk of rows at a time; what the peak shows beyond that is
  // garbage the collector has not taken back yet (40–70 MiB here, whatever the model's size).
  it('building the q4 artifact streams: its peak RSS stays under half the fp32 model', async () => {
    const { size } = await stat(path.join(checkpoint, 'model.safetensors'));
    const build = await child<{ cached: boolean; rssBefore: number; peakDuringBuild: number; weightsBytes: number }>(BUILD_CHILD, ['0', String(LAYERS), 'q4-b64-acc4']);
    const peak = build.peakDuringBuild - build.rssBefore;
    console.log(`q4 build of ${(size / MB).toFixed(1)} MiB of fp32: peak RSS growth ${(peak / MB).toFixed(1)} MiB (artifact ${(build.weightsBytes / MB).toFixed(1)} MiB)`);
    expect(build.cached).toBe(false); // a block size nothing else used: really quantized here, not read or linked from the cache
    expect(peak).toBeLessThan(0.5 * size);
  });
});
