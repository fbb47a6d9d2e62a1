/**
 * The repository stands alone: no file of the project reaches into a `shared` folder beside
 * the repository for data (the models, tokenizers and OpenAPI description the tests use live
 * in test/fixtures). A relative path literal that lands in `<repo>/../shared`, read from the
 * file it is written in or from the repository's root, fails here, as does a path built with
 * `'..', 'shared'`; the project's own `src/shared` is of course fine.
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

  it('no file of the project reads data from outside the repository', () => {
    const offenders: string[] = [];
    for (const file of files(REPO)) {
      if (file === import.meta.filename) continue; // its own examples above
      for (const literal of escapingPaths(file, readFileSync(file, 'utf8'))) offenders.push(`${path.relative(REPO, file)}: ${literal}`);
    }
    expect(offenders).toEqual([]);
  });
});
