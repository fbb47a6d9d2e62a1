/**
 * The repository stands alone, proven on a copy of it with nothing beside it: every file git
 * holds for this checkout (tracked, and new files not ignored: what a clone of this work
 * would contain) is copied into an empty temporary folder — no `shared` folder next to it,
 * no dist/ — and a representative part of the suite runs there: the tests that read each
 * fixture of test/fixtures (stories260k's golden ids, aidreams260k and the demo copy in
 * models/, the tokenizers, the OpenAI OpenAPI description), the `meshnet` command from the
 * sources, and the standalone check itself. Only node_modules comes from this checkout (a
 * link: installing again would take minutes and test npm, not the repository).
 */
import { execFileSync } from 'node:child_process';
import { copyFile, lstat, mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, REPO, run } from './package-harness.ts';

/** Test files that read every fixture folder between them; the CLI runs from the copy's sources. */
const REPRESENTATIVE = [
  'test/standalone.test.ts',
  'test/engine/stories-golden.test.ts',
  'test/models/demo-model.test.ts',
  'test/tokenizer/tokenizer.test.ts',
  'test/openapi/spec-schemas.test.ts',
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
      env: cleanEnv({ MESHNET_HOME: path.join(parent, 'home'), CI: 'true' }),
      timeoutMs: 240_000,
    });
    const summary = `${result.stdout}\n${result.stderr}`;
    expect(result.code, summary).toBe(0);
    // Every file ran (none filtered out or skipped for want of its data).
    expect(summary).toMatch(new RegExp(`Test Files\\s+${REPRESENTATIVE.length} passed \\(${REPRESENTATIVE.length}\\)`));
    expect(summary).not.toMatch(/Tests\s+[^\n]*\d+ (skipped|todo)/);
  }, 300_000);
});
