import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HubDownloadError } from '../../src/node/models/hub-download.ts';
import { createProgressReporter, formatProgress } from '../../src/node/models/progress.ts';
import { ModelSpecError, resolveModel } from '../../src/node/models/resolve-model.ts';
import { TINY_PRESETS, writeTinyCheckpoint } from '../fixtures/checkpoints.ts';
import { startFakeHub, type FakeHub } from './fake-hub.ts';

let root: string;
let hub: FakeHub;
const noFetch = (() => {
  throw new Error('no request expected');
}) as unknown as typeof fetch;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'meshnet-resolve-'));
  const fixture = path.join(root, 'fixture');
  await writeTinyCheckpoint(fixture, { ...TINY_PRESETS.llama, dtype: 'F32', seed: 3 });
  hub = await startFakeHub({ repos: { 'acme/tiny': fixture } });
});

afterAll(async () => {
  await hub?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

describe('resolveModel', () => {
  it("resolves 'demo' to the shipped demo model, whatever the home", async () => {
    const home = path.join(root, 'home-demo');
    expect(await resolveModel('demo', { home, fetch: noFetch })).toEqual({ dir: path.resolve(import.meta.dirname, '../../models/aidreams260k'), id: 'demo' });
  });

  it('resolves an existing folder to itself, named by its basename; a folder wins over the Hub', async () => {
    const folder = path.join(root, 'acme', 'tiny');
    await mkdir(folder, { recursive: true });
    const cwd = process.cwd();
    process.chdir(root);
    try {
      expect(await resolveModel('acme/tiny', { home: path.join(root, 'h'), fetch: noFetch })).toEqual({ dir: folder, id: 'tiny' });
    } finally {
      process.chdir(cwd);
    }
    expect(await resolveModel(path.join(root, 'fixture'), { fetch: noFetch })).toEqual({ dir: path.join(root, 'fixture'), id: 'fixture' });
  });

  it('downloads a Hub id and names it by the id', async () => {
    const home = path.join(root, 'home-hub');
    const lines: string[] = [];
    const resolved = await resolveModel('acme/tiny', { home, endpoint: hub.url, token: '', onProgress: (p) => p.done && lines.push(p.file) });
    expect(resolved).toEqual({ dir: path.join(home, 'hub', 'acme--tiny', 'main'), id: 'acme/tiny' });
    expect(lines).toContain('model.safetensors');
    await expect(resolveModel('acme/nothing', { home, endpoint: hub.url, token: '', onProgress: () => {} })).rejects.toThrow(HubDownloadError);
  });

  it('refuses anything else with a clear error', async () => {
    for (const spec of ['no-such-folder', './missing/dir/x', 'a/b/c', '']) {
      await expect(resolveModel(spec, { home: root, fetch: noFetch })).rejects.toThrow(/not a folder, not 'demo', not a Hub id/);
    }
    const file = path.join(root, 'plain.txt');
    await writeFile(file, 'x');
    await expect(resolveModel(file, { home: root, fetch: noFetch })).rejects.toThrow(ModelSpecError);
  });
});

describe('download progress', () => {
  it('formats a bar with megabytes and percent', () => {
    expect(formatProgress({ file: 'model.safetensors', received: 12_300_000, total: 45_600_000 })).toBe(
      'model.safetensors  [#####---------------]  12.3/45.6 MB  26%',
    );
    expect(formatProgress({ file: 'config.json', received: 2_000_000, total: undefined })).toBe('config.json  2.0 MB');
  });

  it('redraws in place on a TTY and prints one line per file elsewhere', () => {
    const tty: string[] = [];
    const report = createProgressReporter({ isTTY: true, write: (t: string) => tty.push(t) });
    report({ file: 'a', received: 0, total: 10, done: false });
    report({ file: 'a', received: 10, total: 10, done: true });
    expect(tty[0]).toMatch(/^\ra {2}\[-+\] {2}0\.0\/0\.0 MB {2}0%\x1b\[K$/);
    expect(tty.at(-1)).toMatch(/^\ra .*100%\x1b\[K\n$/);

    const log: string[] = [];
    const plain = createProgressReporter({ isTTY: false, write: (t: string) => log.push(t) });
    plain({ file: 'a', received: 5, total: 10, done: false });
    plain({ file: 'a', received: 10, total: 10, done: true });
    plain({ file: 'b', received: 3, total: 3, done: true });
    expect(log).toEqual(['a  [####################]  0.0/0.0 MB  100%\n', 'b  [####################]  0.0/0.0 MB  100%\n']);
  });
});
