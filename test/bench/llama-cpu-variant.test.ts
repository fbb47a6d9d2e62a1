/**
 * bench/llama-cpp/cpu-variant.ts without llama.cpp: the features of a system info line, and the
 * AVX2-only copy of an install (a fake one: empty files named as node-llama-cpp's x64 binaries).
 */
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { avx2Install, cpuFeatures, variantOf } from '../../bench/llama-cpp/cpu-variant.ts';

describe('llama.cpp CPU variants', () => {
  const roots: string[] = [];
  afterAll(async () => {
    for (const root of roots) await rm(root, { recursive: true, force: true });
  });

  it('reads the features llama.cpp reports and the variant of a backend file', () => {
    expect(cpuFeatures('CPU : SSE3 = 1 | AVX2 = 1 | AVX512_VNNI = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | REPACK = 1 | ')).toEqual(['SSE3', 'AVX2', 'AVX512_VNNI', 'AMX_INT8', 'LLAMAFILE', 'REPACK']);
    expect(cpuFeatures('CPU : AVX = 0 | ')).toEqual([]);
    expect(variantOf('libggml-cpu-sapphirerapids.so')).toBe('sapphirerapids');
    expect(variantOf('libggml-cpu-haswell.so')).toBe('haswell');
    expect(variantOf('libggml-base.so')).toBeUndefined();
  });

  it('copies an install keeping only the CPU backends up to AVX2, once', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'meshnet-llama-variant-'));
    roots.push(root);
    const dir = path.join(root, '.llama-cpp');
    const bins = path.join(dir, 'node_modules', '@node-llama-cpp', 'linux-x64', 'bins', 'linux-x64');
    await mkdir(bins, { recursive: true });
    const files = ['libggml-base.so', 'libggml-cpu-haswell.so', 'libggml-cpu-x64.so', 'libggml-cpu-sapphirerapids.so', 'libggml-cpu-zen4.so', 'libggml-cpu-alderlake.so', 'llama-addon.node'];
    for (const f of files) await writeFile(path.join(bins, f), '');
    const copy = await avx2Install(dir);
    expect(copy).toEqual({ ok: true, dir: `${dir}-avx2` });
    const kept = await readdir(path.join(`${dir}-avx2`, 'node_modules', '@node-llama-cpp', 'linux-x64', 'bins', 'linux-x64'));
    expect(kept.sort()).toEqual(['libggml-base.so', 'libggml-cpu-haswell.so', 'libggml-cpu-x64.so', 'llama-addon.node']);
    expect((await readdir(bins)).length).toBe(files.length); // the original install is untouched
    expect(await avx2Install(dir)).toEqual({ ok: true, dir: `${dir}-avx2` });
    const none = path.join(root, 'arm');
    await mkdir(path.join(none, 'node_modules', '@node-llama-cpp', 'mac-arm64-metal', 'bins'), { recursive: true });
    expect(await avx2Install(none)).toMatchObject({ ok: false });
  });
});
