/**
 * Which of onnxruntime-node's GPU providers can work on this machine, found out quietly.
 *
 * Why: trying a provider that cannot work makes native code print to stderr — Dawn (the
 * WebGPU provider) prints "Couldn't load Vulkan" with a stack line, or "vkCreateInstance:
 * Found no drivers!", from C++ straight to file descriptor 2, where Node cannot catch it
 * (onnxruntime's own error lines are silenced with its log level; Dawn ignores that). So
 * `--device auto` asks here first:
 * - CUDA needs its provider libraries beside onnxruntime-node's binding (`npm ci` skips them).
 * - WebGPU on Linux needs the Vulkan loader (libvulkan.so.1) and at least one Vulkan driver
 *   manifest (ICD); both are looked up as the loader would, without loading anything.
 * - When those are there (and on macOS and Windows, where Dawn uses Metal or D3D12), the
 *   provider is tried once in a child process whose stderr is captured.
 * A result holds for the process and its children: it is kept in MESHNET_PROVIDER_PROBE
 * (with the environment it was found under), which worker threads and local peers inherit.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

export interface ProbeResult {
  readonly ok: boolean;
  /** Why the provider cannot be used (when `ok` is false), in words for the start-up line. */
  readonly reason?: string;
}

export type ProbedProvider = 'cuda' | 'webgpu';

const CACHE_VARIABLE = 'MESHNET_PROVIDER_PROBE';
const CHILD = path.join(import.meta.dirname, 'provider-probe-child.mjs');
const PROBE_TIMEOUT_MS = 30_000;
/** Environment that changes what the probes find: a result found under another is not reused. */
const FINGERPRINT_VARIABLES = ['LD_LIBRARY_PATH', 'VK_ICD_FILENAMES', 'VK_DRIVER_FILES', 'VK_ADD_DRIVER_FILES', 'CUDA_VISIBLE_DEVICES'];

const pending = new Map<ProbedProvider, Promise<ProbeResult>>();

/** Whether `provider` can create a session here (cached for the process and its children). */
export function probeProvider(provider: ProbedProvider): Promise<ProbeResult> {
  let result = pending.get(provider);
  if (!result) {
    result = cachedResult(provider) ?? run(provider).then((found) => (remember(provider, found), found));
    pending.set(provider, result);
  }
  return result;
}

async function run(provider: ProbedProvider): Promise<ProbeResult> {
  const missing = provider === 'cuda' ? missingCudaLibraries() : process.platform === 'linux' ? missingVulkan() : undefined;
  if (missing) return { ok: false, reason: missing };
  return probeInChild(provider);
}

function bindingDirectory(): string {
  // onnxruntime-node loads its binding from bin/napi-v6/<platform>/<arch>/ (dist/binding.js).
  const main = createRequire(import.meta.url).resolve('onnxruntime-node');
  return path.join(path.dirname(main), '..', 'bin', 'napi-v6', process.platform, process.arch);
}

/** Why the CUDA provider cannot load, or undefined when its libraries are installed. */
export function missingCudaLibraries(directory = bindingDirectory()): string | undefined {
  const library = process.platform === 'win32' ? 'onnxruntime_providers_cuda.dll' : 'libonnxruntime_providers_cuda.so';
  if (existsSync(path.join(directory, library))) return undefined;
  return 'its libraries are not installed (ONNXRUNTIME_NODE_INSTALL=cuda12 npm rebuild onnxruntime-node)';
}

/**
 * Why Vulkan cannot start here (Linux), or undefined when both the loader and a driver
 * manifest can be found. `env` and `files` are seams for tests.
 */
export function missingVulkan(env: NodeJS.ProcessEnv = process.env, files: FileLookup = realFiles): string | undefined {
  const loaderDirs = [
    ...(env.LD_LIBRARY_PATH ?? '').split(':').filter(Boolean),
    ...(files.ldCache().includes('libvulkan.so.1') ? ['(ld.so.cache)'] : []),
    '/lib',
    '/usr/lib',
    '/lib64',
    '/usr/lib64',
    `/usr/lib/${os.arch() === 'arm64' ? 'aarch64' : 'x86_64'}-linux-gnu`,
    `/lib/${os.arch() === 'arm64' ? 'aarch64' : 'x86_64'}-linux-gnu`,
    '/usr/local/lib',
  ];
  const hasLoader = loaderDirs.some((dir) => dir === '(ld.so.cache)' || files.exists(path.join(dir, 'libvulkan.so.1')));
  if (!hasLoader) return 'no Vulkan loader: libvulkan.so.1 not found';

  // The loader's own rules: VK_DRIVER_FILES (or the older VK_ICD_FILENAMES) replaces the
  // search; VK_ADD_DRIVER_FILES adds to it. Entries are manifest files or folders of them.
  const explicit = env.VK_DRIVER_FILES ?? env.VK_ICD_FILENAMES;
  const listed = (value: string | undefined) => (value ?? '').split(':').filter(Boolean);
  const candidates = explicit !== undefined ? listed(explicit) : [...listed(env.VK_ADD_DRIVER_FILES), ...icdSearchDirs(env)];
  if (candidates.some((entry) => hasManifest(entry, files))) return undefined;
  if (explicit !== undefined) return `no Vulkan driver: ${env.VK_DRIVER_FILES !== undefined ? 'VK_DRIVER_FILES' : 'VK_ICD_FILENAMES'}=${explicit} names no driver manifest`;
  return 'no Vulkan driver: no ICD manifest in the vulkan/icd.d folders';
}

function icdSearchDirs(env: NodeJS.ProcessEnv): string[] {
  const home = env.HOME ?? os.homedir();
  const config = [env.XDG_CONFIG_HOME ?? path.join(home, '.config'), ...(env.XDG_CONFIG_DIRS ?? '/etc/xdg').split(':'), '/etc'];
  const data = [env.XDG_DATA_HOME ?? path.join(home, '.local/share'), ...(env.XDG_DATA_DIRS ?? '/usr/local/share:/usr/share').split(':')];
  return [...config, ...data].filter(Boolean).map((dir) => path.join(dir, 'vulkan', 'icd.d'));
}

function hasManifest(entry: string, files: FileLookup): boolean {
  if (entry.endsWith('.json')) return files.exists(entry);
  return files.list(entry).some((name) => name.endsWith('.json'));
}

/** The file system as the Vulkan checks see it. */
export interface FileLookup {
  exists(file: string): boolean;
  list(dir: string): string[];
  /** The dynamic linker's cache (`/etc/ld.so.cache`) as text, or '' without one. */
  ldCache(): string;
}

const realFiles: FileLookup = {
  exists: (file) => existsSync(file),
  list(dir) {
    try {
      return readdirSync(dir);
    } catch {
      return [];
    }
  },
  ldCache() {
    try {
      return readFileSync('/etc/ld.so.cache', 'latin1');
    } catch {
      return '';
    }
  },
};

/** Create a tiny session on `provider` in a child process; its stderr is kept, not shown. */
function probeInChild(provider: ProbedProvider): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CHILD, provider], { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), PROBE_TIMEOUT_MS);
    child.on('error', (error) => {
      clearTimeout(timer);
      resolve({ ok: false, reason: `the probe could not run: ${error.message}` });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (stdout.includes('"ok":true')) return resolve({ ok: true });
      resolve({ ok: false, reason: probeFailure(stdout, stderr, signal ? `the probe was killed (${signal})` : `the probe exited with code ${code}`) });
    });
  });
}

/** A short reason from what the probe printed (its JSON line, else what native code wrote). */
export function probeFailure(stdout: string, stderr: string, fallback: string): string {
  if (/Couldn't load Vulkan/.test(stderr)) return 'no Vulkan loader: libvulkan.so.1 could not be loaded';
  if (/Found no drivers|VK_ERROR_INCOMPATIBLE_DRIVER/.test(stderr)) return 'no Vulkan driver';
  try {
    const line = stdout.trim().split('\n').at(-1) ?? '';
    const error = (JSON.parse(line) as { error?: string }).error;
    if (error) return /No supported adapters/.test(error) ? 'no WebGPU adapter' : error.split('\n')[0]!.slice(0, 200);
  } catch {
    // no JSON line: the child died before answering
  }
  return fallback;
}

function fingerprint(): string {
  return FINGERPRINT_VARIABLES.map((name) => `${name}=${process.env[name] ?? ''}`).join(';');
}

function cachedResult(provider: ProbedProvider): Promise<ProbeResult> | undefined {
  try {
    const cache = JSON.parse(process.env[CACHE_VARIABLE] ?? '{}') as { env?: string; results?: Record<string, ProbeResult> };
    const hit = cache.env === fingerprint() ? cache.results?.[provider] : undefined;
    return hit && typeof hit.ok === 'boolean' ? Promise.resolve(hit) : undefined;
  } catch {
    return undefined;
  }
}

function remember(provider: ProbedProvider, result: ProbeResult): void {
  let results: Record<string, ProbeResult> = {};
  try {
    const cache = JSON.parse(process.env[CACHE_VARIABLE] ?? '{}') as { env?: string; results?: Record<string, ProbeResult> };
    if (cache.env === fingerprint()) results = cache.results ?? {};
  } catch {
    // a malformed value is replaced
  }
  process.env[CACHE_VARIABLE] = JSON.stringify({ env: fingerprint(), results: { ...results, [provider]: result } });
}
