// The re-executed peer child (src/node/malloc-env.mjs) in the cases around its parent: a
// parent killed while the child was still loading, a child ended by any signal, and the
// child's own children (which must not take themselves for re-executed children).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { alive, until } from './process-watch.ts';
import { PEER_MALLOC_ENV, isGlibc } from '../../src/node/malloc-env.mjs';

const MODULE = path.resolve(import.meta.dirname, '../../src/node/malloc-env.mjs');

function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of [...Object.keys(PEER_MALLOC_ENV), 'MESHNET_MALLOC_CHILD', 'MESHNET_MALLOC_ENV']) delete env[key];
  return env;
}
/** A parent script that runs `child` again through reexec and exits with its code. */
function parentOf(dir: string, child: string): string {
  const parent = path.join(dir, 'parent.mjs');
  writeFileSync(parent, `const m = await import(${JSON.stringify(MODULE)}); process.exitCode = await m.reexec(${JSON.stringify(child)}, [], m.peerMallocEnv({ MESHNET_MALLOC_ENV: '1' }, true));`);
  return parent;
}

describe.runIf(isGlibc())('the re-executed child', () => {
  it('ends when its parent was killed with SIGKILL before it started watching', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'malloc-child-'));
    const pidFile = path.join(dir, 'pid');
    const watching = path.join(dir, 'watching');
    // The child writes its pid, then waits (its event loop running, as while modules load) before watchParent.
    const child = path.join(dir, 'child.mjs');
    writeFileSync(
      child,
      `import { writeFileSync } from 'node:fs';
       writeFileSync(${JSON.stringify(pidFile)}, String(process.pid));
       setInterval(() => {}, 1000);
       await new Promise((r) => setTimeout(r, 1500));
       const m = await import(${JSON.stringify(MODULE)});
       m.watchParent();
       writeFileSync(${JSON.stringify(watching)}, '1');`,
    );
    const parent = spawn(process.execPath, [parentOf(dir, child)], { stdio: 'ignore', env: cleanEnv() });
    expect(await until(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8') !== '', 5000)).toBe(true);
    const pid = Number(readFileSync(pidFile, 'utf8'));
    expect(alive(pid)).toBe(true);
    parent.kill('SIGKILL');
    try {
      // It ends within watchParent (SIGTERM's default action: nothing is written after it).
      expect(await until(() => !alive(pid), 6000)).toBe(true);
      expect(existsSync(watching)).toBe(false);
    } finally {
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
  });

  it('a child ended by a signal is reported as 128 + its number, for any signal', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'malloc-child-'));
    const child = path.join(dir, 'child.mjs');
    writeFileSync(child, `process.kill(process.pid, 'SIGUSR2'); setInterval(() => {}, 1000);`);
    const result = spawnSync(process.execPath, [parentOf(dir, child)], { env: cleanEnv(), encoding: 'utf8', timeout: 10_000 });
    expect(result.signal).toBeNull();
    expect(result.status).toBe(128 + os.constants.signals.SIGUSR2);
  });

  it('processes the child starts do not inherit its mark', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'malloc-child-'));
    const out = path.join(dir, 'grandchild.json');
    const child = path.join(dir, 'child.mjs');
    writeFileSync(
      child,
      `import { execFileSync } from 'node:child_process';
       const m = await import(${JSON.stringify(MODULE)});
       const isChild = m.watchParent();
       const seen = execFileSync(process.execPath, ['-e', 'process.stdout.write(JSON.stringify(process.env.MESHNET_MALLOC_CHILD ?? null))'], { encoding: 'utf8' });
       (await import('node:fs')).writeFileSync(${JSON.stringify(out)}, JSON.stringify({ isChild, seen: JSON.parse(seen) }));`,
    );
    const result = spawnSync(process.execPath, [parentOf(dir, child)], { env: cleanEnv(), encoding: 'utf8', timeout: 10_000 });
    expect(result.status).toBe(0);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual({ isChild: true, seen: null });
  });
});
