/**
 * The dependency boundary: src/core and src/shared run in Node and in browsers alike, so
 * they import no Node built-ins, no onnxruntime runtime package, no server framework and
 * no crossws adapter. Runtimes are injected through seams instead (DESIGN.md).
 *
 * Imports are found with the TypeScript parser (not regular expressions), so multi-line
 * imports, re-exports, dynamic `import()`, `require()` and `import('x').T` types all count.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');
const SCANNED = ['src/core', 'src/shared'];

const NODE_BUILTINS = new Set(builtinModules);

/**
 * Why a module may not be imported from core/shared, or undefined when it may.
 * `typeOnly` is true for `import type` / `export type` and `import('x').T` type positions,
 * which TypeScript erases (with verbatimModuleSyntax, `import { type T }` is NOT erased).
 */
function forbiddenReason(specifier: string, typeOnly: boolean): string | undefined {
  const bare = specifier.split('/')[0]!;
  if (specifier.startsWith('node:') || NODE_BUILTINS.has(specifier) || NODE_BUILTINS.has(bare)) return 'a Node built-in';
  if (specifier === 'onnxruntime-node' || specifier.startsWith('onnxruntime-node/')) return 'the Node onnxruntime';
  if (specifier === 'onnxruntime-web' || specifier.startsWith('onnxruntime-web/')) {
    return typeOnly ? undefined : 'the browser onnxruntime (type imports only)';
  }
  if (specifier === 'onnxruntime-common' || specifier.startsWith('onnxruntime-common/')) {
    return typeOnly ? undefined : 'onnxruntime values (use `import type`; the module is injected)';
  }
  if (specifier.startsWith('crossws/adapters')) return 'a crossws adapter';
  if (specifier === 'h3' || specifier.startsWith('h3/')) return 'the h3 server';
  if (specifier === 'ws' || specifier.startsWith('ws/')) return 'the ws server';
  return undefined;
}

interface Violation {
  readonly file: string;
  readonly line: number;
  readonly specifier: string;
  readonly reason: string;
}

/** Every forbidden import in one source text. */
function findViolations(file: string, source: string): Violation[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: Violation[] = [];
  const check = (node: ts.Node, literal: ts.Expression | undefined, typeOnly: boolean) => {
    if (!literal || !ts.isStringLiteralLike(literal)) return;
    const reason = forbiddenReason(literal.text, typeOnly);
    if (reason === undefined) return;
    const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
    found.push({ file, line, specifier: literal.text, reason });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) {
      check(node, node.moduleSpecifier, node.importClause?.isTypeOnly === true);
    } else if (ts.isExportDeclaration(node)) {
      check(node, node.moduleSpecifier, node.isTypeOnly);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      check(node, node.moduleReference.expression, node.isTypeOnly);
    } else if (ts.isImportTypeNode(node)) {
      const argument = node.argument;
      if (ts.isLiteralTypeNode(argument)) check(node, argument.literal as ts.Expression, true);
    } else if (ts.isCallExpression(node)) {
      const isDynamicImport = node.expression.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(node.expression) && node.expression.text === 'require';
      if (isDynamicImport || isRequire) check(node, node.arguments[0], false);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

function tsFiles(directory: string): string[] {
  let entries: string[];
  try {
    entries = readdirSync(directory);
  } catch {
    return []; // the folder does not exist (yet)
  }
  return entries.flatMap((name) => {
    const full = path.join(directory, name);
    if (statSync(full).isDirectory()) return tsFiles(full);
    return name.endsWith('.ts') ? [full] : [];
  });
}

describe('core and shared import no runtime-specific modules', () => {
  it('every file under src/core and src/shared', () => {
    const files = SCANNED.flatMap((dir) => tsFiles(path.join(ROOT, dir)));
    expect(files.length).toBeGreaterThan(10); // the scan found the sources
    const violations = files.flatMap((file) => findViolations(path.relative(ROOT, file), readFileSync(file, 'utf8')));
    const report = violations.map((v) => `${v.file}:${v.line} imports '${v.specifier}': ${v.reason}`);
    expect(report, `forbidden imports:\n${report.join('\n')}`).toEqual([]);
  });
});

describe('the import scanner', () => {
  const lines = (source: string) => findViolations('x.ts', source).map((v) => `${v.line}:${v.specifier}`);

  it('flags value imports of forbidden modules, with their line', () => {
    const source = [
      "import { readFile } from 'node:fs/promises';",
      "import path from 'path';",
      "import * as os from 'os';",
      "import { randomUUID } from 'crypto';",
      "import 'fs';",
      "import * as ort from 'onnxruntime-node';",
      "import * as web from 'onnxruntime-web/webgpu';",
      "import { Tensor } from 'onnxruntime-common';",
      "import { type InferenceSession } from 'onnxruntime-common';",
      "import { defineHooks } from 'crossws/adapters/node';",
      "import { H3 } from 'h3';",
      "import { WebSocketServer } from 'ws';",
      "export { x } from 'node:os';",
      "const m = await import('onnxruntime-node');",
      "const f = require('fs');",
      'import {',
      '  join,',
      "} from 'node:path';",
    ].join('\n');
    expect(lines(source)).toEqual([
      '1:node:fs/promises',
      '2:path',
      '3:os',
      '4:crypto',
      '5:fs',
      '6:onnxruntime-node',
      '7:onnxruntime-web/webgpu',
      '8:onnxruntime-common',
      '9:onnxruntime-common',
      '10:crossws/adapters/node',
      '11:h3',
      '12:ws',
      '13:node:os',
      '14:onnxruntime-node',
      '15:fs',
      '16:node:path',
    ]);
  });

  it('allows type-only imports of onnxruntime-common and -web, and ordinary modules', () => {
    const source = [
      "import type * as Ort from 'onnxruntime-common';",
      "import type { Tensor } from 'onnxruntime-web';",
      "export type { InferenceSession } from 'onnxruntime-common';",
      "type T = import('onnxruntime-common').Tensor;",
      "import { Template } from '@huggingface/jinja';",
      "import { KvState } from './kv-state.ts';",
      "import { plugin } from 'crossws';",
      "const s = 'import x from \"fs\"';",
      "// import fs from 'fs';",
    ].join('\n');
    expect(lines(source)).toEqual([]);
  });

  it('still refuses type imports of Node built-ins and onnxruntime-node', () => {
    const source = ["import type { Stats } from 'node:fs';", "type S = import('onnxruntime-node').InferenceSession;"].join('\n');
    expect(lines(source)).toEqual(['1:node:fs', '2:onnxruntime-node']);
  });
});
