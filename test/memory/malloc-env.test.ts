// With MESHNET_MALLOC_ENV=1, `meshnet peer` runs itself again under glibc's malloc settings (src/node/malloc-env.mjs):
// when it does, that the child gets them and its exit code reaches the parent's caller, and
// that the child does not outlive a parent killed with SIGKILL.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { alive, until } from './process-watch.ts';
import { PEER_MALLOC_ENV, isGlibc, peerMallocEnv } from '../../src/node/malloc-env.mjs';

const MODULE = path.resolve(import.meta.dirname, '../../src/node/malloc-env.mjs');
const BIN = path.resolve(import.meta.dirname, '../../bin/meshnet.js');

describe('peerMallocEnv', () => {
  it('refuses to run again from the re-executed child', async () => {
    const { reexec } = await import('../../src/node/malloc-env.mjs');
    process.env.MESHNET_MALLOC_CHILD = '1';
    try {
      await expect(reexec('x.mjs', [], {})).rejects.toThrow(/already the re-executed child/);
    } finally {
      delete process.env.MESHNET_MALLOC_CHILD;
    }
  });

  it('adds the settings only when MESHNET_MALLOC_ENV=1 asks, on glibc, unless already set or in the re-executed child', () => {
    const on = { MESHNET_MALLOC_ENV: '1' };
    expect(peerMallocEnv(on, true)).toEqual(PEER_MALLOC_ENV);
    expect(peerMallocEnv({}, true)).toBeUndefined(); // off by default: they cost decode CPU (bench/README)
    expect(peerMallocEnv({ MESHNET_MALLOC_ENV: '0' }, true)).toBeUndefined();
    expect(peerMallocEnv(on, false)).toBeUndefined();
    expect(peerMallocEnv({ ...on, MALLOC_ARENA_MAX: '4' }, true)).toBeUndefined();
    expect(peerMallocEnv({ ...on, MESHNET_MALLOC_CHILD: '1' }, true)).toBeUndefined();
  });
});

describe.runIf(isGlibc())('reexec', () => {
  it('runs the script again with the settings and exits with its code', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'malloc-env-'));
    const child = path.join(dir, 'child.mjs');
    writeFileSync(child, `import { writeFileSync } from 'node:fs'; writeFileSync(${JSON.stringify(path.join(dir, 'env.json'))}, JSON.stringify({ arena: process.env.MALLOC_ARENA_MAX, mmap: process.env.MALLOC_MMAP_THRESHOLD_, args: process.argv.slice(2) })); process.exit(3);`);
    const parent = path.join(dir, 'parent.mjs');
    writeFileSync(parent, `const m = await import(${JSON.stringify(MODULE)}); process.exitCode = await m.reexec(${JSON.stringify(child)}, ['a', 'b'], m.peerMallocEnv({ MESHNET_MALLOC_ENV: '1' }, true));`);
    const env = { ...process.env };
    for (const key of [...Object.keys(PEER_MALLOC_ENV), 'MESHNET_MALLOC_CHILD', 'MESHNET_MALLOC_ENV']) delete env[key];
    const result = spawnSync(process.execPath, [parent], { env, encoding: 'utf8', timeout: 10_000 });
    expect(result.status).toBe(3);
    expect(JSON.parse(readFileSync(path.join(dir, 'env.json'), 'utf8'))).toEqual({ arena: PEER_MALLOC_ENV.MALLOC_ARENA_MAX, mmap: PEER_MALLOC_ENV.MALLOC_MMAP_THRESHOLD_, args: ['a', 'b'] });
  });

  it('the child ends when its parent is killed with SIGKILL', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'malloc-env-'));
    const pidFile = path.join(dir, 'pid');
    const child = path.join(dir, 'child.mjs');
    writeFileSync(child, `import { writeFileSync } from 'node:fs'; const m = await import(${JSON.stringify(MODULE)}); m.watchParent(); process.on('SIGTERM', () => process.exit(0)); writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000);`);
    const parentScript = path.join(dir, 'parent.mjs');
    writeFileSync(parentScript, `const m = await import(${JSON.stringify(MODULE)}); await m.reexec(${JSON.stringify(child)}, [], m.peerMallocEnv({ MESHNET_MALLOC_ENV: '1' }, true));`);
    const env = { ...process.env };
    delete env.MESHNET_MALLOC_CHILD;
    const parent = spawn(process.execPath, [parentScript], { stdio: 'ignore', env });
    expect(await until(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8') !== '', 5000)).toBe(true);
    const pid = Number(readFileSync(pidFile, 'utf8'));
    expect(alive(pid)).toBe(true);
    parent.kill('SIGKILL');
    expect(await until(() => !alive(pid), 3000)).toBe(true);
  });

  it('meshnet peer passes its exit code through the re-executed child', () => {
    const env: NodeJS.ProcessEnv = { ...process.env, MESHNET_RUN: 'source' };
    for (const key of [...Object.keys(PEER_MALLOC_ENV), 'MESHNET_MALLOC_CHILD', 'MESHNET_MALLOC_ENV']) delete env[key];
    const result = spawnSync(process.execPath, [BIN, 'peer', '--no-such-option'], { env: { ...env, MESHNET_MALLOC_ENV: '1' }, encoding: 'utf8', timeout: 20_000 });
    const direct = spawnSync(process.execPath, [BIN, 'peer', '--no-such-option'], { env, encoding: 'utf8', timeout: 20_000 });
    expect(direct.status).not.toBe(0);
    expect(result.status).toBe(direct.status);
    expect(result.stderr).toBe(direct.stderr);
  });
});
