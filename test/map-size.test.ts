/**
 * The map's size rules (issue 21): no source file over 400 lines, and each seam a runtime
 * plugs into small — at most six members — with a conformance suite under test/suites/ that
 * a test file runs. Members are counted with the TypeScript parser: every property and
 * method signature of the interface itself (a nested object type counts once).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');
const MAX_LINES = 400;
const MAX_SEAM_MEMBERS = 6;

/** Each seam: the file declaring it, and its conformance suite. */
const SEAMS = [
  { name: 'ShardExecutor', file: 'src/core/runtime/shard-executor.ts', suite: 'test/suites/shard-executor.suite.ts' },
  { name: 'TextTokenizer', file: 'src/core/model/tokenizer.ts', suite: 'test/suites/text-tokenizer.suite.ts' },
  { name: 'MeshModel', file: 'src/core/mesh/mesh-model.ts', suite: 'test/suites/mesh-model.suite.ts' },
  { name: 'PeerLink', file: 'src/core/runtime/peer-link.ts', suite: 'test/suites/peer-link.suite.ts' },
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return name === 'node_modules' ? [] : sourceFiles(full);
    return /\.(ts|mts|js|mjs)$/.test(name) && !name.endsWith('.d.ts') ? [full] : [];
  });
}

const relative = (file: string) => path.relative(ROOT, file).split(path.sep).join('/');

/** The member names of interface `name` declared in `source` (undefined when it declares none). */
function interfaceMembers(source: string, name: string): string[] | undefined {
  const sf = ts.createSourceFile('x.ts', source, ts.ScriptTarget.Latest, true);
  const found = sf.statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === name);
  return found?.members.map((m) => (m.name ? m.name.getText(sf) : ts.SyntaxKind[m.kind]));
}

describe('the map stays small', () => {
  it(`no source file over ${MAX_LINES} lines (src/, apps/)`, () => {
    const files = ['src', 'apps'].flatMap((dir) => sourceFiles(path.join(ROOT, dir)));
    expect(files.length).toBeGreaterThan(200);
    const long = files.map((f) => ({ file: relative(f), lines: readFileSync(f, 'utf8').split('\n').length - 1 })).filter((f) => f.lines > MAX_LINES);
    expect(long.map((f) => `${f.file}: ${f.lines} lines`)).toEqual([]);
  });

  const testFiles = sourceFiles(path.join(ROOT, 'test')).filter((f) => f.endsWith('.test.ts') || f.endsWith('.spec.ts'));
  for (const seam of SEAMS) {
    it(`${seam.name}: at most ${MAX_SEAM_MEMBERS} members, and its conformance suite is run`, () => {
      const members = interfaceMembers(readFileSync(path.join(ROOT, seam.file), 'utf8'), seam.name);
      expect(members, `${seam.file} declares interface ${seam.name}`).toBeDefined();
      expect(members!.length, `${seam.name}: ${members!.join(', ')}`).toBeLessThanOrEqual(MAX_SEAM_MEMBERS);
      const suiteName = path.basename(seam.suite, '.ts');
      const runners = testFiles.filter((f) => readFileSync(f, 'utf8').includes(`suites/${suiteName}`));
      expect(runners.length, `a test file imports ${seam.suite}`).toBeGreaterThan(0);
    });
  }

  it('the member counter counts what an interface declares, nested object types once', () => {
    const source = 'export interface A { readonly x: number; y?: string; run(a: number): void; get z(): number; readonly n: { a: 1; b: 2 } }\ninterface B { q: 1 }';
    expect(interfaceMembers(source, 'A')).toEqual(['x', 'y', 'run', 'z', 'n']);
    expect(interfaceMembers(source, 'B')).toEqual(['q']);
    expect(interfaceMembers(source, 'C')).toBeUndefined();
  });
});
