/**
 * llama.cpp's CPU kernels by instruction set. node-llama-cpp's prebuilt x64 binary carries one
 * ggml CPU backend per CPU generation (`libggml-cpu-<variant>.so`) and loads the best one the
 * machine runs: on a recent Xeon the `sapphirerapids` one (AVX-512 VNNI, AMX int8, Q4_0 repacked
 * at load). `--llama-cpp-avx2` (bench/run.ts) adds a llama.cpp row on a copy of the install that
 * keeps only the variants up to AVX2 (`haswell` and older), so meshnet's q4 can be held against
 * llama.cpp's AVX2 kernels on the same machine as well as against its best.
 */
import { cp, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';

/** ggml CPU variants whose kernels use at most AVX2 (and FMA/F16C): no AVX-512, no AVX-VNNI, no AMX. */
export const AVX2_VARIANTS: readonly string[] = ['x64', 'sse42', 'sandybridge', 'ivybridge', 'piledriver', 'haswell'];

/** The `X = 1` features of llama.cpp's system info line (`CPU : SSE3 = 1 | AVX2 = 1 | …`): what its loaded CPU backend uses. */
export function cpuFeatures(systemInfo: string): string[] {
  return [...systemInfo.matchAll(/([A-Z][A-Z0-9_]*) = 1/g)].map((m) => m[1]);
}

/** The ggml CPU variant name of a backend library file, or undefined (`libggml-cpu-haswell.so` → `haswell`). */
export function variantOf(file: string): string | undefined {
  return /^(?:lib)?ggml-cpu-([a-z0-9_]+)\.(?:so|dll|dylib)$/.exec(file)?.[1];
}

/**
 * A copy of the install in `dir` beside it (`<dir>-avx2`, made once) whose binary folders hold
 * only AVX2_VARIANTS' CPU backends; undefined with a reason when the install has no such
 * variants (arm64, macOS: one backend, nothing to choose).
 */
export async function avx2Install(dir: string): Promise<{ ok: true; dir: string } | { ok: false; reason: string }> {
  const bins = path.join(dir, 'node_modules', '@node-llama-cpp');
  const copy = `${dir}-avx2`;
  const folders = await binaryFolders(bins);
  if (!folders.some((f) => f.files.some((file) => variantOf(file) === 'haswell'))) return { ok: false, reason: 'this install has no per-CPU-generation ggml backends (no libggml-cpu-haswell)' };
  if (!(await stat(copy).catch(() => undefined))) {
    await rm(`${copy}.tmp`, { recursive: true, force: true });
    await cp(dir, `${copy}.tmp`, { recursive: true, verbatimSymlinks: true });
    for (const folder of await binaryFolders(path.join(`${copy}.tmp`, 'node_modules', '@node-llama-cpp'))) {
      for (const file of folder.files) {
        const variant = variantOf(file);
        if (variant !== undefined && !AVX2_VARIANTS.includes(variant)) await rm(path.join(folder.path, file));
      }
    }
    await rename(`${copy}.tmp`, copy);
  }
  return { ok: true, dir: copy };
}

/** Every folder under `root` that holds a ggml CPU backend, with its file names. */
async function binaryFolders(root: string): Promise<{ path: string; files: string[] }[]> {
  const out: { path: string; files: string[] }[] = [];
  const walk = async (folder: string, depth: number) => {
    const entries = await readdir(folder, { withFileTypes: true }).catch(() => []);
    const files = entries.filter((e) => e.isFile()).map((e) => e.name);
    if (files.some((f) => variantOf(f) !== undefined)) out.push({ path: folder, files });
    if (depth < 4) for (const e of entries) if (e.isDirectory()) await walk(path.join(folder, e.name), depth + 1);
  };
  await walk(root, 0);
  return out;
}
