/**
 * The repository stands alone, proven on a copy of it with nothing beside it: every file git
 * holds for this checkout (tracked, and new files not ignored: what a clone of this work
 * would contain; in CI, a clean clone) is copied into an empty temporary folder — no
 * `shared` folder next to it, no dist/ — and a representative part of the suite runs there
 * (below), the standalone check included. Only node_modules comes from this checkout, as a
 * link: installing again would take minutes and test npm, not the repository.
 */
import { execFileSync } from 'node:child_process';
import { copyFile, lstat, mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, REPO, run } from './package-harness.ts';

/**
 * Test files that read every fixture folder between them, kept fast: stories260k (checkpoint
 * reader, the reference forward pass's golden ids, its tokenizer), the Qwen2.5 tokenizer of
 * test/fixtures/tokenizers (the grammar engine over its 151,936 pieces), the OpenAPI
 * description (its schemas; every body api/ receives is checked against it), and the demo
 * model of models/ with aidreams260k's golden text, served with two local peer processes
 * that `bin/meshnet.js` starts from the copy's TypeScript sources.
 */
const REPRESENTATIVE = [
  'test/standalone.test.ts',
  'test/model/checkpoint.test.ts',
  'test/reference/forward.test.ts',
  'test/tokenizer/tokenizer.test.ts',
  'test/grammar/xgrammar-engine.test.ts',
  'test/openapi/spec-schemas.test.ts',
  'test/api/demo-model.test.ts',
];

let parent: string;
let clone: string;
beforeAll(async () => {
  parent = await mkdtemp(path.join(os.tmpdir(), 'meshnet-alone-'));
  clone = path.join(parent, 'meshnet');
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: REPO, encoding: 'utf8' }).split('\0').filter(Boolean);
  for (const file of listed) {
    const from = path.join(REPO, file);
    if (!existsSync(from) || (await lstat(from)).isDirectory()) continue; // deleted in the work tree, or a submodule
    await mkdir(path.dirname(path.join(clone, file)), { recursive: true });
    await copyFile(from, path.join(clone, file));
  }
  await symlink(path.join(REPO, 'node_modules'), path.join(clone, 'node_modules'), 'dir');
}, 120_000);
afterAll(async () => {
  if (parent) await rm(parent, { recursive: true, force: true });
});

describe('a copy of the repository with nothing beside it', () => {
  it('has no shared folder next to it and no build', async () => {
    expect(await readdir(parent)).toEqual(['meshnet']);
    expect(existsSync(path.join(clone, 'dist'))).toBe(false);
    for (const file of REPRESENTATIVE) expect(existsSync(path.join(clone, file)), file).toBe(true);
  });

  it('passes a representative part of the suite there', async () => {
    const vitest = path.join(clone, 'node_modules', 'vitest', 'vitest.mjs');
    const result = await run(process.execPath, [vitest, 'run', '--maxWorkers', '1', ...REPRESENTATIVE], {
      cwd: clone,
      env: cleanEnv({ MESHNET_HOME: path.join(parent, 'home'), CI: 'true', NO_COLOR: '1', FORCE_COLOR: '0' }),
      timeoutMs: 240_000,
    });
    const summary = `${result.stdout}\n${result.stderr}`;
    expect(result.code, summary).toBe(0);
    // Every file ran (none filtered out or skipped for want of its data).
    expect(summary).toMatch(new RegExp(`Test Files\\s+${REPRESENTATIVE.length} passed \\(${REPRESENTATIVE.length}\\)`));
    expect(summary).not.toMatch(/Tests\s+[^\n]*\d+ (skipped|todo)/);
  }, 300_000);
});
