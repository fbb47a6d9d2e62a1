/**
 * node-llama-cpp for the bench's llama.cpp rows, installed on first use into a folder of its
 * own — never a dependency of the project: with every prebuilt binary it weighs about
 * 700 MB. On the platforms below only the package and this platform's CPU binary are
 * installed (`--omit=optional` plus that one binary package, about 85 MB on linux-x64);
 * elsewhere npm picks the binaries itself. The folder defaults to bench/.llama-cpp
 * (git-ignored; `BENCH_LLAMA_CPP_DIR` overrides it) and is kept across runs and `--cold`.
 */
import { spawn } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

export const NODE_LLAMA_CPP_VERSION = '3.22.1';

/** node-llama-cpp's prebuilt-binary package per `${platform}-${arch}` (CPU or Metal builds). */
const BINARY_PACKAGE: Record<string, string> = {
  'linux-x64': '@node-llama-cpp/linux-x64',
  'linux-arm64': '@node-llama-cpp/linux-arm64',
  'darwin-arm64': '@node-llama-cpp/mac-arm64-metal',
  'darwin-x64': '@node-llama-cpp/mac-x64',
  'win32-x64': '@node-llama-cpp/win-x64',
};

export const defaultLlamaCppDir = () => process.env.BENCH_LLAMA_CPP_DIR ?? path.join(import.meta.dirname, '..', '.llama-cpp');

export type LlamaCppInstall = { readonly ok: true; readonly dir: string; readonly installed: boolean } | { readonly ok: false; readonly dir: string; readonly reason: string };

async function installedVersion(dir: string): Promise<string | undefined> {
  const text = await readFile(path.join(dir, 'node_modules', 'node-llama-cpp', 'package.json'), 'utf8').catch(() => undefined);
  return text === undefined ? undefined : (JSON.parse(text) as { version?: string }).version;
}

function run(command: string, args: string[], cwd: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], shell: process.platform === 'win32' });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('error', (error) => resolve({ code: -1, output: `${output}${error.message}` }));
    child.on('exit', (code) => resolve({ code, output }));
  });
}

/**
 * Makes sure node-llama-cpp NODE_LLAMA_CPP_VERSION is installed in `dir` (installing it with
 * npm from the registry when it is not). Never throws: a failure comes back as a reason.
 */
export async function ensureNodeLlamaCpp(dir = defaultLlamaCppDir(), log: (line: string) => void = () => {}): Promise<LlamaCppInstall> {
  if ((await installedVersion(dir)) === NODE_LLAMA_CPP_VERSION) return { ok: true, dir, installed: false };
  const binary = BINARY_PACKAGE[`${process.platform}-${process.arch}`];
  const dependencies: Record<string, string> = { 'node-llama-cpp': NODE_LLAMA_CPP_VERSION, ...(binary ? { [binary]: NODE_LLAMA_CPP_VERSION } : {}) };
  log(`installing node-llama-cpp ${NODE_LLAMA_CPP_VERSION}${binary ? ` with ${binary}` : ''} into ${dir} (once; outside the project's dependencies)`);
  try {
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'package.json'), `${JSON.stringify({ name: 'meshnet-bench-llama-cpp', private: true, description: 'node-llama-cpp for meshnet\'s bench (bench/llama-cpp/install.ts)', dependencies }, null, 2)}\n`);
  } catch (error) {
    return { ok: false, dir, reason: `cannot write ${dir}: ${(error as Error).message}` };
  }
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  // The install scripts stay off: the prebuilt binary is a plain package, and node-llama-cpp's
  // postinstall would only look for (or build) binaries we do not use.
  const args = ['install', '--prefix', dir, '--no-audit', '--no-fund', '--ignore-scripts', ...(binary ? ['--omit=optional'] : [])];
  const result = await run(npm, args, dir);
  const version = await installedVersion(dir);
  if (result.code !== 0 || version !== NODE_LLAMA_CPP_VERSION) {
    // npm's first error lines say what failed (code, request); the last ones are boilerplate.
    const lines = result.output.split('\n').map((l) => l.trim()).filter((l) => /^npm (error|ERR!)\s+\S/.test(l));
    const detail = (lines.length ? lines.slice(0, 2) : result.output.trim().split('\n').slice(-2)).join(' | ');
    return { ok: false, dir, reason: `npm install node-llama-cpp@${NODE_LLAMA_CPP_VERSION} failed (exit ${result.code}): ${detail}` };
  }
  return { ok: true, dir, installed: true };
}
