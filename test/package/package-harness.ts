/**
 * The packed package, as a user gets it: `npm pack` of this checkout (its dist/ built from the
 * sources as they are now: built first when stale), installed from the tarball into an empty
 * temporary folder with no repository around it. Installing takes the dependencies from npm's
 * cache, which `npm ci` filled (`--prefer-offline`: nothing is downloaded that is cached).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { staleReason } from '../../scripts/build-info.mjs';

export const REPO = path.resolve(import.meta.dirname, '../..');

export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * The environment for a nested npm or meshnet: without the `npm_*` variables `npm test` sets
 * (they name this repository's package.json and prefix), so nothing points back at the checkout.
 */
export function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key) && key !== 'INIT_CWD' && key !== 'MESHNET_RUN'));
  return { ...env, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false', ...extra };
}

export function run(command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 180_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface PackedFile {
  readonly path: string;
  readonly size: number;
}

export interface Tarball {
  readonly file: string;
  readonly size: number;
  readonly unpackedSize: number;
  readonly files: readonly PackedFile[];
}

/** `npm pack` into `destination`; builds dist/ first when it is not a build of the current sources. */
export async function packTarball(destination: string): Promise<Tarball> {
  const stale = staleReason(REPO);
  if (stale) {
    const built = await run('npm', ['run', 'build'], { cwd: REPO });
    if (built.code !== 0) throw new Error(`npm run build failed (dist/ was stale: ${stale}):\n${built.stdout}\n${built.stderr}`);
  }
  // The build is fresh now: packing runs no script (`prepare` would build it again).
  const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', destination], { cwd: REPO });
  if (packed.code !== 0) throw new Error(`npm pack failed:\n${packed.stderr}`);
  const [info] = JSON.parse(packed.stdout) as [{ filename: string; size: number; unpackedSize: number; files: PackedFile[] }];
  return { file: path.join(destination, info.filename), size: info.size, unpackedSize: info.unpackedSize, files: info.files };
}

export interface Installed {
  /** The empty folder the tarball was installed into (package.json, node_modules). */
  readonly dir: string;
  readonly installMs: number;
  remove(): Promise<void>;
}

/**
 * `npm install <tarball>` into a fresh temporary folder. onnxruntime-node's postinstall would
 * download CUDA libraries from outside the npm registry: skipped, as the README says to offline.
 */
export async function installTarball(tarball: string): Promise<Installed> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'meshnet-installed-'));
  await writeFile(path.join(dir, 'package.json'), `${JSON.stringify({ name: 'meshnet-user', private: true, type: 'module' })}\n`);
  const started = performance.now();
  const installed = await run('npm', ['install', tarball, '--prefer-offline', '--no-audit', '--no-fund'], { cwd: dir, env: cleanEnv({ ONNXRUNTIME_NODE_INSTALL: 'skip' }) });
  if (installed.code !== 0) throw new Error(`npm install ${tarball} failed:\n${installed.stderr}`);
  return { dir, installMs: performance.now() - started, remove: () => rm(dir, { recursive: true, force: true }) };
}
