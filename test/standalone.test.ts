/**
 * The repository stands alone: no file of the project reaches into a `shared` folder beside
 * the repository for data (the models, tokenizers and OpenAPI description the tests use live
 * in test/fixtures). A relative path literal that lands in `<repo>/../shared`, read from the
 * file it is written in or from the repository's root, fails here, as does a path built with
 * `'..', 'shared'`; the project's own `src/shared` is of course fine. And every data folder
 * names its source (a README) and carries its licence. test/package/clone-alone.test.ts runs
 * part of the suite on a copy of the repository with nothing beside it.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = path.resolve(import.meta.dirname, '..');
const SKIP = new Set(['node_modules', '.git', 'test-results', 'playwright-report', 'dist', '.cache', '.llama-cpp']);
const TEXT = /\.(ts|tsx|js|mjs|cjs|json|md|html|sh|jinja)$|^run$/;

function* files(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name) || name === 'package-lock.json') continue;
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) yield* files(full);
    else if (TEXT.test(name) && statSync(full).size < 2_000_000) yield full;
  }
}

/** Folders holding data files (anything but TypeScript and READMEs), under `dir`. */
function dataFolders(dir: string): string[] {
  const found: string[] = [];
  const names = readdirSync(dir);
  if (names.some((name) => statSync(path.join(dir, name)).isFile() && !/\.ts$|^README\.md$|^LICENSE$|^NOTICE$/.test(name))) found.push(dir);
  for (const name of names) if (statSync(path.join(dir, name)).isDirectory()) found.push(...dataFolders(path.join(dir, name)));
  return found;
}

/** Paths written in a file (`../../shared/models`, `'..', 'shared'`) that land in the `shared` folder beside the repository. */
function escapingPaths(file: string, text: string, repo = REPO): string[] {
  const outside = path.resolve(repo, '..', 'shared');
  const inOutside = (p: string): boolean => p === outside || p.startsWith(outside + path.sep);
  const found: string[] = [];
  for (const match of text.matchAll(/(?:^|[\s'"`(=:,])((?:\.\.\/)+[\w.@-][\w./@-]*)/g)) {
    const literal = match[1]!;
    // From the file; a document is read from the repository's root too (READMEs name paths from there).
    const fromRoot = file.endsWith('.md') && inOutside(path.resolve(repo, literal));
    if (inOutside(path.resolve(path.dirname(file), literal)) || fromRoot) found.push(literal);
  }
  for (const match of text.matchAll(/['"]\.\.['"]\s*,\s*['"]shared['"]/g)) found.push(match[0]);
  return found;
}

describe('the repository stands alone', () => {
  it('finds a path that climbs out of the repository (the check can fail)', () => {
    expect(escapingPaths(path.join(REPO, 'test/x/y.ts'), "path.resolve(import.meta.dirname, '../../../shared/models/stories260k')")).toEqual(['../../../shared/models/stories260k']);
    expect(escapingPaths(path.join(REPO, 'bench/README.md'), 'Models: `../shared/models/stories260k`')).toHaveLength(1);
    expect(escapingPaths(path.join(REPO, 'README.md'), 'See `../shared/DESIGN.md` for the map.')).toEqual(['../shared/DESIGN.md']);
    expect(escapingPaths(path.join(REPO, 'bench/x.ts'), "path.resolve(BENCH, '..', 'shared', 'models')")).toHaveLength(1);
    expect(escapingPaths(path.join(REPO, 'test/x/y.ts'), "import { a } from '../../src/shared/protocol.ts'")).toEqual([]);
    expect(escapingPaths(path.join(REPO, 'test/x/y.ts'), "readFile('../../../etc/hostname')")).toEqual([]);
  });

  it('every data folder of test/fixtures and models/ says where its files come from and under which licence', () => {
    const missing: string[] = [];
    for (const root of ['test/fixtures', 'models']) {
      for (const dir of dataFolders(path.join(REPO, root))) {
        const names = readdirSync(dir);
        const readme = names.includes('README.md') || readdirSync(path.dirname(dir)).includes('README.md');
        if (!readme) missing.push(`${path.relative(REPO, dir)}: no README.md (its source) in it or its parent`);
        if (!names.includes('LICENSE') && !names.includes('NOTICE')) missing.push(`${path.relative(REPO, dir)}: no LICENSE or NOTICE`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('no file of the project reads data from outside the repository', () => {
    const offenders: string[] = [];
    for (const file of files(REPO)) {
      if (file === import.meta.filename) continue; // its own examples above
      for (const literal of escapingPaths(file, readFileSync(file, 'utf8'))) offenders.push(`${path.relative(REPO, file)}: ${literal}`);
    }
    expect(offenders).toEqual([]);
  });
});
